#include "profiler/op_profile.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "profiler/op_cost.h"
#include "runtime/debug_executor.h"

namespace kiln::profiler {

std::string joinOps(const std::vector<std::string>& ops, const std::string& separator) {
  std::string s;
  for (size_t i = 0; i < ops.size(); ++i) s += (i ? separator : "") + ops[i];
  return s;
}

namespace {

/// The graph each sub-plan executor was lowered from: an If/Loop call's first output names its
/// node, whose regions pair with the call's sub-plans in order.
void mapRegionGraphs(const core::Graph& graph, const runtime::GraphExecutor& executor,
                     std::map<const runtime::GraphExecutor*, const core::Graph*>& out) {
  std::map<std::string, core::ValueId> byName;
  for (core::ValueId v = 0; v < static_cast<core::ValueId>(graph.values().size()); ++v)
    byName.emplace(graph.value(v).name, v);
  const runtime::GraphPlan& plan = executor.plan();
  for (const runtime::KernelCall& call : plan.calls) {
    if (call.regions.empty() || call.numOutputs < 1) continue;
    auto it = byName.find(plan.slots[call.args[call.args.size() - call.numOutputs]].name);
    if (it == byName.end() || graph.value(it->second).producer < 0) continue;
    const core::Node& node = graph.node(graph.value(it->second).producer);
    if (node.regions.size() != call.regions.size()) continue;
    for (size_t r = 0; r < call.regions.size(); ++r) {
      const runtime::GraphExecutor* sub = executor.regions().at(call.regions[r]).get();
      out[sub] = node.regions[r].get();
      mapRegionGraphs(*node.regions[r], *sub, out);
    }
  }
}

}  // namespace

ProfileRecord profileExecutor(runtime::GraphExecutor& executor, const core::Graph& graph,
                              const ProfileOptions& options) {
  ProfileRecord profile;
  const runtime::GraphPlan& plan = executor.plan();
  profile.batch = plan.inputs.empty() || plan.slots[plan.inputs[0]].shape.empty()
                      ? 1
                      : plan.slots[plan.inputs[0]].shape[0];
  profile.repeat = std::max(1, options.repeat);

  // End-to-end runs and call-by-call passes alternate, so both see the same machine state (a
  // background load that comes and goes shifts both medians alike, not one of them).
  runtime::DebugExecutor debug(executor);
  for (int w = 0; w < options.warmup; ++w) {
    executor.run();
    debug.run(0, 1);
  }
  // One timed repeat of `number` whole runs, without warm-up.
  auto once = [](int number) {
    TimingOptions t;
    t.warmup = 0;
    t.number = number;
    t.repeat = 1;
    return t;
  };
  int number = 1;  // whole runs per end-to-end sample, grown until a sample lasts minRepeatMs
  if (options.minRepeatMs > 0) {
    Timing probe = timeIt([&] { executor.run(); }, once(1));
    if (probe.medianMs > 0 && probe.medianMs < options.minRepeatMs)
      number = std::min(1 << 20, static_cast<int>(std::ceil(options.minRepeatMs / probe.medianMs)));
  }
  std::vector<double> e2eSamples;
  std::vector<runtime::DebugRepeat> repeats;
  for (int r = 0; r < profile.repeat; ++r) {
    Timing one = timeIt([&] { executor.run(); }, once(number));
    e2eSamples.push_back(one.medianMs);
    repeats.push_back(debug.run(0, 1).front());
  }
  profile.endToEnd = timingFromSamples(std::move(e2eSamples), number);
  profile.endToEnd.warmup = options.warmup;
  std::vector<CallCost> costs = describeCalls(graph, plan);

  // The timeline shows the repeat whose total is the median one: a typical pass, not the best.
  std::vector<size_t> order(repeats.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return repeats[a].totalUs < repeats[b].totalUs; });
  const runtime::DebugRepeat& timeline = repeats[order[order.size() / 2]];

  double sumUs = 0;
  for (int c = 0; c < debug.numCalls(); ++c) {
    const runtime::KernelCall& call = debug.call(c);
    std::vector<double> samples;
    for (const auto& r : repeats) samples.push_back(r.durationUs[c]);
    Timing t = timingFromSamples(samples);
    OpRecord op;
    op.index = c;
    op.name = call.node.empty() ? call.kernel : call.node;
    op.kernel = call.kernel;
    op.key = costs[c].key;
    op.ops = costs[c].ops;
    op.timeUs = t.medianMs;  // samples are µs here
    op.meanUs = t.meanMs;
    op.minUs = t.minMs;
    op.outputShape = costs[c].outputShape;
    op.inputShapes = costs[c].inputShapes;
    op.flops = costs[c].flops;
    op.bytes = costs[c].bytes;
    op.startUs = timeline.startUs[c];
    op.durationUs = timeline.durationUs[c];
    sumUs += op.timeUs;
    profile.ops.push_back(std::move(op));
  }

  // Calls inside if/loop calls: their totals per pass (a loop body's calls over all iterations),
  // placed one after another inside their top-level call in the timeline.
  const std::vector<runtime::NestedCall>& nested = debug.nestedCalls();
  std::map<const runtime::GraphExecutor*, const core::Graph*> regionGraphs;
  mapRegionGraphs(graph, executor, regionGraphs);
  std::map<const runtime::GraphExecutor*, std::vector<CallCost>> regionCosts;
  std::map<int, double> offsetInParent;
  for (size_t k = 0; k < nested.size(); ++k) {
    const runtime::NestedCall& n = nested[k];
    std::vector<double> samples, runs;
    for (const auto& r : repeats) {
      samples.push_back(r.nestedUs[k]);
      runs.push_back(static_cast<double>(r.nestedRuns[k]));
    }
    Timing t = timingFromSamples(samples);
    std::sort(runs.begin(), runs.end());
    OpRecord op;
    op.index = debug.numCalls() + static_cast<int>(k);
    op.parent = n.topCall;
    op.name = n.call->node.empty() ? n.call->kernel : n.call->node;
    op.kernel = n.call->kernel;
    op.calls = static_cast<int>(runs[runs.size() / 2]);
    op.timeUs = t.medianMs;
    op.meanUs = t.meanMs;
    op.minUs = t.minMs;
    auto graphIt = regionGraphs.find(n.executor);
    if (graphIt != regionGraphs.end()) {
      auto [costIt, fresh] = regionCosts.try_emplace(n.executor);
      if (fresh) costIt->second = describeCalls(*graphIt->second, n.executor->plan());
      const CallCost& cost = costIt->second.at(n.index);
      op.key = cost.key;
      op.ops = cost.ops;
      op.outputShape = cost.outputShape;
      op.inputShapes = cost.inputShapes;
      op.flops = cost.flops * op.calls;
      op.bytes = cost.bytes * op.calls;
    }
    // In the timeline each appears once, for its total, after the calls before it in its
    // top-level call (a nested if/loop spans the calls after it).
    double& offset = offsetInParent[n.topCall];
    op.startUs = timeline.startUs[n.topCall] + offset;
    op.durationUs = timeline.nestedUs[k];
    if (n.call->regions.empty()) offset += op.durationUs;
    profile.ops.push_back(std::move(op));
  }

  for (OpRecord& op : profile.ops) op.percent = sumUs > 0 ? 100.0 * op.timeUs / sumUs : 0;
  profile.sumMs = sumUs / 1000.0;
  profile.sumMeanMs = 0;
  for (const OpRecord& op : profile.ops)
    if (op.parent < 0) profile.sumMeanMs += op.meanUs / 1000.0;
  return profile;
}

std::vector<OpRecord> groupByOperator(const std::vector<OpRecord>& ops) {
  // An if/loop call's time is the sum of the calls inside it: count those instead.
  std::set<int> parents;
  for (const OpRecord& op : ops)
    if (op.parent >= 0) parents.insert(op.parent);
  std::map<std::string, OpRecord> groups;
  for (const OpRecord& op : ops) {
    if (op.parent < 0 && parents.count(op.index)) continue;
    std::string anchor = op.ops.empty() ? op.kernel : op.ops.front();
    auto [it, fresh] = groups.try_emplace(anchor);
    OpRecord& g = it->second;
    if (fresh) {
      g.name = g.key = anchor;
      g.ops = {anchor};
      g.calls = 0;
      g.index = op.index;
    }
    g.calls += op.calls;
    g.timeUs += op.timeUs;
    g.meanUs += op.meanUs;
    g.minUs += op.minUs;
    g.percent += op.percent;
    g.flops += op.flops;
    g.bytes += op.bytes;
  }
  std::vector<OpRecord> out;
  for (auto& [name, g] : groups) out.push_back(std::move(g));
  std::stable_sort(out.begin(), out.end(),
                   [](const OpRecord& a, const OpRecord& b) { return a.timeUs > b.timeUs; });
  return out;
}

std::string chromeTraceJson(const ProfileRecord& profile, const std::string& title) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", title}}}});
  events.push_back(
      {{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "graph"}}}});
  for (const OpRecord& op : profile.ops) {
    nlohmann::json args = {{"kernel", op.kernel},      {"ops", joinOps(op.ops)}, {"output", op.outputShape},
                           {"inputs", op.inputShapes}, {"flops", op.flops},      {"bytes", op.bytes},
                           {"median_us", op.timeUs}};
    events.push_back({{"name", op.name},
                      {"cat", op.ops.empty() ? "kernel" : op.ops.front()},
                      {"ph", "X"},
                      {"ts", op.startUs},
                      {"dur", op.durationUs},
                      {"pid", 1},
                      {"tid", 1},
                      {"args", std::move(args)}});
  }
  nlohmann::json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  return trace.dump(1);
}

std::string profileJson(const ProfileRecord& p) {
  nlohmann::json j;
  j["batch"] = p.batch;
  j["repeat"] = p.repeat;
  j["end_to_end_ms"] = {{"median", p.endToEnd.medianMs},  {"min", p.endToEnd.minMs},
                        {"mean", p.endToEnd.meanMs},      {"max", p.endToEnd.maxMs},
                        {"stddev", p.endToEnd.stddevMs},  {"cv", p.endToEnd.cv()},
                        {"samples", p.endToEnd.samplesMs}};
  j["sum_of_call_medians_ms"] = p.sumMs;
  j["sum_of_call_means_ms"] = p.sumMeanMs;
  j["gap_percent"] = p.gapPercent();
  j["calls"] = nlohmann::json::array();
  for (const OpRecord& op : p.ops) {
    j["calls"].push_back({{"index", op.index},
                          {"name", op.name},
                          {"key", op.key},
                          {"kernel", op.kernel},
                          {"ops", op.ops},
                          {"time_us", op.timeUs},
                          {"mean_us", op.meanUs},
                          {"min_us", op.minUs},
                          {"percent", op.percent},
                          {"calls", op.calls},
                          {"output_shape", op.outputShape},
                          {"input_shapes", op.inputShapes},
                          {"flops", op.flops},
                          {"gflops_per_s", op.gflops()},
                          {"bytes", op.bytes},
                          {"parent", op.parent}});
  }
  return j.dump(2);
}

}  // namespace kiln::profiler

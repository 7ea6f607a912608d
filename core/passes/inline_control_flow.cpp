#include "core/passes/inline_control_flow.h"

#include <optional>

#include "core/passes/fold_constants.h"
#include "core/passes/rewrite.h"
#include "runtime/tensor_values.h"

namespace kiln::core::passes {
namespace {

/// The truth of a one-element value when it is a constant.
std::optional<bool> knownTruth(const Graph& graph, ValueId v) {
  const Value& value = graph.value(v);
  if (!value.isConstant() || value.constant->numel() != 1) return std::nullopt;
  return runtime::elementIsTrue(*value.constant);
}

runtime::Tensor indexConstant(int64_t k) {
  runtime::Tensor t = runtime::Tensor::zeros(DType::Int64, {});
  *t.data<int64_t>() = k;
  return t;
}

/// A constant trip count, exactly (TorchScript's `while` has 2^63 − 1, which a double rounds up
/// past the int64 range).
std::optional<int64_t> knownInt(const Graph& graph, ValueId v) {
  const Value& value = graph.value(v);
  if (!value.isConstant() || value.constant->numel() != 1 || value.type.dtype != DType::Int64) return std::nullopt;
  return *value.constant->data<int64_t>();
}

/// How many times `loop` node `node` runs when every iteration's condition is known, else nullopt.
std::optional<int64_t> unrolledTrips(const Graph& graph, const Node& node, const InlineControlFlowOptions& options) {
  std::optional<int64_t> trip = knownInt(graph, node.inputs[0]);
  std::optional<bool> cond = knownTruth(graph, node.inputs[1]);
  if (!trip || !cond) return std::nullopt;
  if (!*cond || *trip <= 0) return 0;
  const Graph& body = *node.regions[0];
  if (*trip == 1) return 1;  // the body's condition is never read
  std::optional<bool> next = knownTruth(body, body.outputs()[0]);
  if (!next) return std::nullopt;
  int64_t trips = *next ? *trip : 1;
  auto bodyNodes = static_cast<int64_t>(body.nodes().size());
  if (trips > options.maxTrip || trips * bodyNodes > options.maxNodes) return std::nullopt;
  return trips;
}

}  // namespace

bool inlineControlFlow(Graph& graph, const InlineControlFlowOptions& options, PassCounters* counters) {
  // Decide first: most graphs have nothing to inline and are left untouched.
  std::vector<std::optional<int64_t>> plan(graph.nodes().size());  // if: branch index; loop: trips
  bool any = false;
  for (NodeId n = 0; n < static_cast<NodeId>(graph.nodes().size()); ++n) {
    const Node& node = graph.node(n);
    if (node.op == "if") {
      if (std::optional<bool> cond = knownTruth(graph, node.inputs[0])) plan[n] = *cond ? 0 : 1;
    } else if (node.op == "loop") {
      plan[n] = unrolledTrips(graph, node, options);
    }
    any = any || plan[n].has_value();
  }
  if (!any) return false;

  GraphRewriter rw(graph);
  int64_t ifs = 0, loops = 0, iterations = 0;
  for (NodeId n = 0; n < static_cast<NodeId>(graph.nodes().size()); ++n) {
    const Node& node = graph.node(n);
    if (!plan[n]) {
      rw.copyNode(n);
      continue;
    }
    std::vector<ValueId> results;
    if (node.op == "if") {
      std::vector<ValueId> args;
      for (size_t i = 1; i < node.inputs.size(); ++i) args.push_back(rw.map(node.inputs[i]));
      results = rw.inlineRegion(*node.regions[static_cast<size_t>(*plan[n])], args);
      ++ifs;
    } else {
      auto carried = static_cast<size_t>(node.attrs.getInt("carried"));
      std::vector<ValueId> values, invariant;
      for (size_t i = 0; i < carried; ++i) values.push_back(rw.map(node.inputs[2 + i]));
      for (size_t i = 2 + carried; i < node.inputs.size(); ++i) invariant.push_back(rw.map(node.inputs[i]));
      for (int64_t k = 0; k < *plan[n]; ++k) {
        std::vector<ValueId> args = {rw.addConstant("i", indexConstant(k))};
        args.insert(args.end(), values.begin(), values.end());
        args.insert(args.end(), invariant.begin(), invariant.end());
        std::vector<ValueId> outs = rw.inlineRegion(*node.regions[0], args);
        values.assign(outs.begin() + 1, outs.end());  // the condition is known (unrolledTrips)
      }
      results = values;
      ++loops;
      iterations += *plan[n];
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) rw.replace(node.outputs[i], results[i]);
  }
  graph = rw.finish();
  // The index constants and what the inlined code computes from them.
  foldConstants(graph);
  bump(counters, "ifs-inlined", ifs);
  bump(counters, "loops-unrolled", loops);
  bump(counters, "iterations", iterations);
  return true;
}

}  // namespace kiln::core::passes

// Shared helpers for the graph-pass tests: text in, text out (XLA-style, the graph is parsed from
// a raw string, the pass runs, the printed result is compared with the expected text), and
// numerics of optimized vs unoptimized graphs through lowering and the TIR interpreter.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/compile.h"
#include "core/ir/parser.h"
#include "core/ir/printer.h"
#include "core/lower/interpreter.h"
#include "core/lower/lower.h"
#include "core/passes/pass_manager.h"
#include "core/passes/rewrite.h"
#include "core/passes/verifier.h"

namespace kiln::core::passes::testing {

/// Parses `text`, applies `pass` and returns the printed graph (no locations). Checks that the
/// result verifies and parses back to an equal graph, and that the pass reported `changed`
/// exactly when the text changed.
inline std::string afterPass(const std::string& text, const std::function<bool(Graph&)>& pass,
                             PrintOptions print = {.locations = false}) {
  Graph g = parseGraph(text);
  std::string before = printGraph(g, print);
  bool changed = pass(g);
  std::string after = printGraph(g, print);
  EXPECT_EQ(verifyGraph(g), std::vector<std::string>{});
  EXPECT_EQ(changed, before != after) << "the pass's changed flag disagrees with the text";
  Graph again = parseGraph(printGraph(g));
  EXPECT_TRUE(again == g) << "the result does not round-trip through text";
  return after;
}

/// Runs pipeline text over `text` and returns the printed graph (no locations), verifying
/// after every pass.
inline std::string afterPipeline(const std::string& text, const std::string& pipeline) {
  Graph g = parseGraph(text);
  PassManagerOptions options;
  options.verify = true;
  PassManager(parsePipeline(pipeline), options).run(g);
  return printGraph(g, {.locations = false});
}

/// Runs a plan with the TIR interpreter (f32 slots): every call's kernel is looked up by name.
inline std::vector<std::vector<float>> runPlan(const lower::LoweredModule& m,
                                               const std::vector<std::vector<float>>& inputs) {
  std::map<std::string, const tir::PrimFunc*> byName;
  for (const auto& f : m.funcs) byName[f.name] = &f;
  std::vector<std::vector<float>> slots(m.plan.slots.size());
  for (size_t s = 0; s < m.plan.slots.size(); ++s) {
    const auto& slot = m.plan.slots[s];
    switch (slot.kind) {
      case runtime::SlotKind::Input: slots[s] = inputs.at(slot.index); break;
      case runtime::SlotKind::Constant: {
        const auto& t = m.plan.constants.at(slot.index);
        slots[s].assign(t.data<float>(), t.data<float>() + t.numel());
        break;
      }
      case runtime::SlotKind::Intermediate:
        slots[s].assign(runtime::numElements(slot.shape), std::nanf(""));
        break;
    }
  }
  for (const auto& call : m.plan.calls) {
    std::vector<void*> args;
    for (int s : call.args) args.push_back(slots[s].data());
    lower::interpret(*byName.at(call.kernel), args);
  }
  std::vector<std::vector<float>> outputs;
  for (int s : m.plan.outputs) outputs.push_back(slots[s]);
  return outputs;
}

/// Random f32 inputs in [-2, 2] for the graph's inputs.
inline std::vector<std::vector<float>> randomInputs(const Graph& g, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<std::vector<float>> inputs;
  for (ValueId v : g.inputs()) {
    std::vector<float> data(static_cast<size_t>(g.type(v).numel()));
    for (float& x : data) x = dist(rng);
    inputs.push_back(std::move(data));
  }
  return inputs;
}

/// `graph` with every f32 constant that is all zeros (an `elided` constant in the text) filled
/// with random data in [-1, 1], so numerics tests see real weights.
inline Graph withRandomElidedConstants(const Graph& graph, uint32_t seed = 11) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  GraphRewriter rw(graph);
  for (ValueId v = 0; v < static_cast<ValueId>(graph.values().size()); ++v) {
    const Value& value = graph.value(v);
    if (!value.isConstant() || value.type.dtype != DType::Float32) continue;
    const float* data = value.constant->data<float>();
    if (std::any_of(data, data + value.type.numel(), [](float x) { return x != 0.0f; })) continue;
    runtime::Tensor t = runtime::Tensor::zeros(DType::Float32, value.type.shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
    rw.replaceWithConstant(v, std::move(t));
  }
  for (NodeId n = 0; n < static_cast<NodeId>(graph.nodes().size()); ++n) rw.copyNode(n);
  return rw.finish();
}

/// Lowers and interprets `text` before and after `pipeline` on the same random inputs (elided
/// constants filled with random data) and expects equal outputs within `tol`·(1 + |expected|).
/// Returns the optimized module.
inline lower::LoweredModule expectSameNumerics(const std::string& text, const std::string& pipeline,
                                               double tol = 1e-5) {
  Graph plain = withRandomElidedConstants(parseGraph(text));
  Graph optimized = plain;
  PassManagerOptions options;
  options.verify = true;
  PassManager(parsePipeline(pipeline), options).run(optimized);
  auto inputs = randomInputs(plain);
  auto expected = runPlan(lower::lowerGraph(plain), inputs);
  lower::LoweredModule module = lower::lowerGraph(optimized);
  auto actual = runPlan(module, inputs);
  EXPECT_EQ(actual.size(), expected.size());
  for (size_t o = 0; o < actual.size() && o < expected.size(); ++o) {
    EXPECT_EQ(actual[o].size(), expected[o].size());
    int bad = 0;
    for (size_t i = 0; i < actual[o].size() && i < expected[o].size(); ++i) {
      double a = actual[o][i], e = expected[o][i];
      if (!(std::isnan(a) && std::isnan(e)) && !(std::fabs(a - e) <= tol * (1 + std::fabs(e))) && bad++ < 5)
        ADD_FAILURE() << "output " << o << " element " << i << ": " << a << " vs " << e;
    }
  }
  return module;
}

}  // namespace kiln::core::passes::testing

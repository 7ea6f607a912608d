// Shared helpers for the lowering tests: parse a one-node graph, lower it, run the PrimFunc in the
// TIR interpreter on random data and compare with a reference written in the test.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/ir/parser.h"
#include "core/lower/interpreter.h"
#include "core/lower/lower.h"
#include "core/tir/functor.h"
#include "runtime/error.h"

namespace kiln::core::lower::testing {

inline std::vector<float> randomData(int64_t n, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

/// A lowered first node run on random f32 inputs (constants keep their bound data).
struct NodeRun {
  Graph graph;
  tir::PrimFunc func;
  std::vector<std::vector<float>> inputs;  // one per node input, row-major
  std::vector<float> output;
};

/// Parses `text`, lowers node 0 and interprets it. Inputs are uniform in [lo, hi].
inline NodeRun runFirstNode(const std::string& text, uint32_t seed = 1, float lo = -2.0f, float hi = 2.0f) {
  NodeRun r{parseGraph(text), {}, {}, {}};
  const Node& node = r.graph.node(0);
  r.func = lowerNode(r.graph, 0, "f");
  std::vector<void*> args;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const Value& v = r.graph.value(node.inputs[i]);
    if (v.isConstant()) {
      const float* p = v.constant->data<float>();
      r.inputs.emplace_back(p, p + v.type.numel());
    } else {
      r.inputs.push_back(randomData(v.type.numel(), seed + static_cast<uint32_t>(i) * 7919u, lo, hi));
    }
  }
  for (auto& in : r.inputs) args.push_back(in.data());
  r.output.assign(static_cast<size_t>(r.graph.type(node.outputs[0]).numel()), std::nanf(""));
  args.push_back(r.output.data());
  interpret(r.func, args);
  return r;
}

/// |actual − expected| ≤ tol·(1 + |expected|) elementwise.
inline void expectClose(const std::vector<float>& actual, const std::vector<float>& expected, double tol = 1e-5) {
  ASSERT_EQ(actual.size(), expected.size());
  int reported = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    double a = actual[i], e = expected[i];
    bool ok = (std::isnan(a) && std::isnan(e)) || a == e || std::fabs(a - e) <= tol * (1.0 + std::fabs(e));
    if (!ok && reported++ < 8) ADD_FAILURE() << "element " << i << ": got " << a << ", expected " << e;
  }
  EXPECT_EQ(reported, 0) << "mismatching elements";
}

/// Counts the loops of each kind in a function body.
inline int countLoops(const tir::PrimFunc& f, tir::ForKind kind) {
  struct Counter : tir::IRVisitor {
    tir::ForKind kind;
    int count = 0;
    using tir::IRVisitor::visit;
    void visit(const tir::For* op) override {
      if (op->forKind == kind) ++count;
      tir::IRVisitor::visit(op);
    }
  } counter;
  counter.kind = kind;
  counter.visitStmt(f.body);
  return counter.count;
}

/// Row-major flat index of `idx` in `shape`.
inline int64_t flatIndex(const std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

}  // namespace kiln::core::lower::testing

#include "core/passes/simplify_inference.h"

#include <vector>

#include "core/passes/rewrite.h"
#include "runtime/error.h"
#include "runtime/tensor_values.h"

namespace kiln::core::passes {
namespace {

runtime::Tensor scalarTensor(DType dtype, double value) {
  runtime::Tensor t = runtime::Tensor::zeros(dtype, {});
  if (dtype == DType::Float64)
    t.data<double>()[0] = value;
  else
    t.data<float>()[0] = static_cast<float>(value);
  return t;
}

class Simplifier {
 public:
  Simplifier(const Graph& graph, PassCounters* counters)
      : m_graph(graph), m_rw(graph), m_counters(counters) {}

  bool run() {
    for (NodeId n = 0; n < static_cast<NodeId>(m_graph.nodes().size()); ++n) {
      const Node& node = m_graph.node(n);
      if (node.op == "batch_norm" && isFloat(m_graph.type(node.inputs[0]).dtype)) {
        lowerBatchNorm(node);
      } else if (isIdentity(node)) {
        m_rw.replace(node.outputs[0], m_rw.map(node.inputs[0]));
        bump(m_counters, "identities-removed");
        m_changed = true;
      } else if (isSquare(node)) {
        // pow(x, 2) → x·x: the same value (x·x is pow's exact result rounded once), without a
        // libm call per element (layer norm's variance in ONNX files).
        ValueId x = m_rw.map(node.inputs[0]);
        m_rw.replaceWithNode(node.outputs[0], "mul", {x, x}, {}, node.location);
        bump(m_counters, "squares");
        m_changed = true;
      } else if (node.op == "reshape" && producerOp(node.inputs[0]) == "reshape") {
        const Node& inner = m_graph.node(m_graph.value(node.inputs[0]).producer);
        m_rw.replaceWithNode(node.outputs[0], "reshape", {m_rw.map(inner.inputs[0])},
                             Attrs{{"shape", m_graph.type(node.outputs[0]).shape}}, node.location);
        bump(m_counters, "reshapes-merged");
        m_changed = true;
      } else {
        m_rw.copyNode(n);
      }
    }
    return m_changed;
  }

  Graph finish() { return m_rw.finish(); }

 private:
  static bool isFloat(DType d) { return d == DType::Float32 || d == DType::Float64; }

  std::string producerOp(ValueId v) const {
    NodeId p = m_graph.value(v).producer;
    return p < 0 ? "" : m_graph.node(p).op;
  }

  /// pow(x, 2) with a constant scalar exponent that does not broadcast x.
  bool isSquare(const Node& node) const {
    if (node.op != "pow" || node.inputs.size() != 2) return false;
    const Value& e = m_graph.value(node.inputs[1]);
    const TensorType& x = m_graph.type(node.inputs[0]);
    if (!e.isConstant() || e.type.numel() != 1 || !isFloat(x.dtype) || m_graph.type(node.outputs[0]) != x) return false;
    return runtime::elementAsDouble(*e.constant, 0) == 2.0;
  }

  bool isIdentity(const Node& node) const {
    if (node.outputs.size() != 1 || node.inputs.empty()) return false;
    const TensorType& in = m_graph.type(node.inputs[0]);
    const TensorType& out = m_graph.type(node.outputs[0]);
    if (node.op == "copy") return true;
    if (node.op == "reshape") return in == out;
    if (node.op == "transpose") {
      const auto& perm = node.attrs.getInts("perm");
      for (size_t d = 0; d < perm.size(); ++d) {
        int64_t p = perm[d] < 0 ? perm[d] + in.rank() : perm[d];
        if (p != static_cast<int64_t>(d)) return false;
      }
      return true;
    }
    return false;
  }

  // y = x·scale + shift with scale = γ/sqrt(σ²+ε), shift = β − μ·scale.
  void lowerBatchNorm(const Node& node) {
    const std::string& loc = node.location;
    const std::string& stem = m_graph.value(node.outputs[0]).name;
    ValueId x = m_rw.map(node.inputs[0]), gamma = m_rw.map(node.inputs[1]), beta = m_rw.map(node.inputs[2]);
    ValueId mean = m_rw.map(node.inputs[3]), var = m_rw.map(node.inputs[4]);
    const TensorType& xt = m_graph.type(node.inputs[0]);
    double eps = node.attrs.getFloat("epsilon", 1e-5);

    ValueId epsilon = m_rw.addConstant(stem + "_eps", scalarTensor(xt.dtype, eps));
    ValueId varEps = m_rw.addNode("add", {var, epsilon}, {}, loc, stem + "_var_eps");
    ValueId stddev = m_rw.addNode("sqrt", {varEps}, {}, loc, stem + "_std");
    ValueId scale = m_rw.addNode("div", {gamma, stddev}, {}, loc, stem + "_scale");
    ValueId meanScaled = m_rw.addNode("mul", {mean, scale}, {}, loc, stem + "_mean_scaled");
    ValueId shift = m_rw.addNode("sub", {beta, meanScaled}, {}, loc, stem + "_shift");
    if (xt.rank() > 2) {
      Shape perChannel(static_cast<size_t>(xt.rank() - 1), 1);
      perChannel[0] = xt.shape[1];
      scale = m_rw.addNode("reshape", {scale}, Attrs{{"shape", perChannel}}, loc, stem + "_scale_c");
      shift = m_rw.addNode("reshape", {shift}, Attrs{{"shape", perChannel}}, loc, stem + "_shift_c");
    }
    ValueId scaled = m_rw.addNode("mul", {x, scale}, {}, loc, stem + "_scaled");
    m_rw.replaceWithNode(node.outputs[0], "add", {scaled, shift}, {}, loc);
    bump(m_counters, "batch-norms");
    m_changed = true;
  }

  const Graph& m_graph;
  GraphRewriter m_rw;
  PassCounters* m_counters;
  bool m_changed = false;
};

}  // namespace

bool simplifyInference(Graph& graph, PassCounters* counters) {
  Simplifier s(graph, counters);
  if (!s.run()) return false;
  graph = s.finish();
  return true;
}

}  // namespace kiln::core::passes

#include "core/passes/fold_scale_axis.h"

#include <optional>
#include <set>
#include <vector>

#include "core/passes/rewrite.h"
#include "runtime/error.h"

namespace kiln::core::passes {
namespace {

double readElement(const runtime::Tensor& t, int64_t i) {
  return t.dtype() == DType::Float64 ? t.data<double>()[i] : static_cast<double>(t.data<float>()[i]);
}

void writeElement(runtime::Tensor& t, int64_t i, double v) {
  if (t.dtype() == DType::Float64)
    t.data<double>()[i] = v;
  else
    t.data<float>()[i] = static_cast<float>(v);
}

/// The per-channel values of constant `k` broadcast against `out` along `axis`, or nothing when
/// `k` varies along another axis.
std::optional<std::vector<double>> perChannel(const runtime::Tensor& k, const Shape& out, size_t axis) {
  const Shape& ks = k.shape();
  if (ks.size() > out.size()) return std::nullopt;
  size_t lead = out.size() - ks.size();
  bool varies = false;
  for (size_t d = lead; d < out.size(); ++d) {
    int64_t extent = ks[d - lead];
    if (extent == 1) continue;
    if (d != axis) return std::nullopt;
    varies = true;
  }
  int64_t channels = out[axis];
  std::vector<double> values(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) values[c] = readElement(k, varies ? c : 0);
  return values;
}

/// `w` with row o (the slice w[o, ...]) multiplied by s[o].
runtime::Tensor scaledRows(const runtime::Tensor& w, const std::vector<double>& s) {
  runtime::Tensor out = w.clone();
  auto rows = static_cast<int64_t>(s.size());
  int64_t rowSize = w.numel() / rows;
  for (int64_t o = 0; o < rows; ++o) {
    if (w.dtype() == DType::Float32) {
      float* row = out.data<float>() + o * rowSize;
      auto scale = static_cast<float>(s[o]);
      for (int64_t i = 0; i < rowSize; ++i) row[i] *= scale;
    } else {
      double* row = out.data<double>() + o * rowSize;
      for (int64_t i = 0; i < rowSize; ++i) row[i] *= s[o];
    }
  }
  return out;
}

/// y = a·s + t per channel.
struct Affine {
  std::vector<double> s, t;
};

class Folder {
 public:
  Folder(const Graph& graph, PassCounters* counters)
      : m_graph(graph), m_uses(valueUses(graph)), m_rw(graph), m_counters(counters) {}

  bool run() {
    for (NodeId n = 0; n < static_cast<NodeId>(m_graph.nodes().size()); ++n) {
      if (m_folded.count(n)) continue;
      if (!tryFold(n)) m_rw.copyNode(n);
    }
    return !m_folded.empty();
  }

  Graph finish() { return m_rw.finish(); }

 private:
  bool isConstant(ValueId v) const { return m_graph.value(v).isConstant(); }

  bool tryFold(NodeId n) {
    const Node& anchor = m_graph.node(n);
    if (anchor.op != "conv2d" && anchor.op != "dense") return false;
    DType dtype = m_graph.type(anchor.outputs[0]).dtype;
    if (dtype != DType::Float32 && dtype != DType::Float64) return false;
    if (!isConstant(anchor.inputs[1]) || (anchor.inputs.size() == 3 && !isConstant(anchor.inputs[2])))
      return false;
    const Shape& outShape = m_graph.type(anchor.outputs[0]).shape;
    size_t axis = anchor.op == "conv2d" ? 1 : outShape.size() - 1;
    int64_t channels = outShape[axis];

    Affine f{std::vector<double>(channels, 1.0), std::vector<double>(channels, 0.0)};
    std::vector<NodeId> chain;
    ValueId cur = anchor.outputs[0];
    while (!isGraphOutput(m_graph, cur) && m_uses[cur].size() == 1) {
      NodeId c = m_uses[cur][0];
      if (!absorb(m_graph.node(c), cur, outShape, axis, f)) break;
      chain.push_back(c);
      cur = m_graph.node(c).outputs[0];
    }
    if (chain.empty()) return false;

    runtime::Tensor weight = scaledRows(*m_graph.value(anchor.inputs[1]).constant, f.s);
    runtime::Tensor bias = runtime::Tensor::zeros(dtype, {channels});
    for (int64_t o = 0; o < channels; ++o) {
      double b = anchor.inputs.size() == 3 ? readElement(*m_graph.value(anchor.inputs[2]).constant, o) : 0.0;
      writeElement(bias, o, b * f.s[o] + f.t[o]);
    }
    const std::string& wName = m_graph.value(anchor.inputs[1]).name;
    ValueId w = m_rw.addConstant(wName + "_folded", std::move(weight));
    ValueId b = m_rw.addConstant(wName + "_bias_folded", std::move(bias));
    m_rw.replaceWithNode(cur, anchor.op, {m_rw.map(anchor.inputs[0]), w, b}, anchor.attrs, anchor.location);
    m_folded.insert(n);
    m_folded.insert(chain.begin(), chain.end());
    bump(m_counters, "anchors");
    bump(m_counters, "ops-folded", static_cast<int64_t>(chain.size()));
    return true;
  }

  /// Applies `op` (one operand `cur`, the other a per-channel constant) to `f`; false when the
  /// op does not qualify.
  bool absorb(const Node& op, ValueId cur, const Shape& outShape, size_t axis, Affine& f) const {
    if (op.inputs.size() != 2 || op.inputs[0] == op.inputs[1]) return false;
    if (op.op != "mul" && op.op != "add" && op.op != "sub" && op.op != "div") return false;
    if (m_graph.type(op.outputs[0]).shape != outShape) return false;
    bool curFirst = op.inputs[0] == cur;
    ValueId other = curFirst ? op.inputs[1] : op.inputs[0];
    if (!isConstant(other)) return false;
    auto k = perChannel(*m_graph.value(other).constant, outShape, axis);
    if (!k) return false;
    if (op.op == "div" && !curFirst) return false;
    for (size_t c = 0; c < k->size(); ++c) {
      double kc = (*k)[c];
      if (op.op == "mul") {
        f.s[c] *= kc;
        f.t[c] *= kc;
      } else if (op.op == "add") {
        f.t[c] += kc;
      } else if (op.op == "sub" && curFirst) {
        f.t[c] -= kc;
      } else if (op.op == "sub") {
        f.s[c] = -f.s[c];
        f.t[c] = kc - f.t[c];
      } else {
        f.s[c] /= kc;
        f.t[c] /= kc;
      }
    }
    return true;
  }

  const Graph& m_graph;
  std::vector<std::vector<NodeId>> m_uses;
  GraphRewriter m_rw;
  PassCounters* m_counters;
  std::set<NodeId> m_folded;
};

}  // namespace

bool foldScaleAxis(Graph& graph, PassCounters* counters) {
  Folder folder(graph, counters);
  if (!folder.run()) return false;
  graph = folder.finish();
  return true;
}

}  // namespace kiln::core::passes

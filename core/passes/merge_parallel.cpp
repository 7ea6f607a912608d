// Merging parallel convolutions and dense ops
// ===========================================
//
// The pattern. Inception blocks run several 1×1 convolutions on one input side by side; attention
// projects one sequence through separate query/key/value dense layers; ResNet-50's first
// bottleneck computes its 1×1 reduction and its 1×1 downsample from the same activation. Each of
// those ops reads the whole input, and each is a GEMM whose output-channel dimension is only a
// part of what the machine could use well.
//
// The rewrite. Siblings S = {op_1, ..., op_k} with
//   - the same input value as input 0,
//   - the same op (conv2d, conv2d_nchwc or dense), groups 1, equal attributes (stride, padding,
//     dilation, layouts) and equal weight shapes except along the output-channel axis 0,
//   - constant weights and (optional) constant biases,
// become one op over the weights concatenated along axis 0, W = [W_1; ...; W_k] (the packed
// weights [O/y, I/x, KH, KW, x, y] concatenate along their output-block axis the same way) and
// the biases b = [b_1; ...; b_k] (zeros for a member without one), followed by
//   y_i = strided_slice(y, axis c: [o_i, o_i + O_i))
// where c is the channel axis of the output (1 for NCHW and NCHW[x]c, whose slice is counted in
// channel blocks; the last axis for dense) and o_i = O_1 + ... + O_{i-1}. y_i keeps op_i's value
// name, so consumers and graph outputs do not change. The wide op is emitted where the first
// sibling was (every sibling reads only the shared input and constants, so every later use is
// still after it), the others disappear.
//
// When it pays. One wide GEMM instead of k narrow ones: the input (the im2col panel of a 1×1
// convolution, the activation rows of a dense) is read once instead of k times, the register
// tiles along the output channels are full more often (k convolutions of 24 channels leave
// partial vector blocks; 72 channels do not), and k kernel launches become one. The price is the
// slices: the siblings' epilogues (bias, relu, residual add) no longer fuse into their own
// convolution, they fuse with the slice into an element kernel (and with a concat that
// reassembles the branches, into the concat's kernel), one extra pass over the outputs. That is
// cheap next to a convolution with a large reduction and, for the 1×1 convolutions this targets,
// about what the k separate input reads cost. It is an O4 (experimental) pass for that reason.
//
// Not merged: grouped and depthwise convolutions (their output channels do not share the
// input), ops with computed weights, siblings whose attributes or kernel sizes differ (ResNet's
// 3×3 stride-2 branch next to its 1×1 stride-2 downsample).
#include "core/passes/merge_parallel.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/ir/printer.h"
#include "core/passes/rewrite.h"
#include "runtime/error.h"

namespace kiln::core::passes {
namespace {

bool isMergeableOp(const std::string& op) { return op == "conv2d" || op == "conv2d_nchwc" || op == "dense"; }

/// The class key of a node that may merge with siblings reading the same input (op, weight
/// dtype and shape past axis 0, attributes), or "" when it may not merge.
std::string siblingKey(const Graph& graph, const Node& node) {
  if (!isMergeableOp(node.op) || node.outputs.size() != 1 || node.inputs.size() < 2) return "";
  if (node.op != "dense" && node.attrs.getInt("groups", 1) != 1) return "";
  for (size_t i = 1; i < node.inputs.size(); ++i)
    if (!graph.value(node.inputs[i]).isConstant()) return "";
  const TensorType& w = graph.type(node.inputs[1]);
  Shape rest(w.shape.begin() + 1, w.shape.end());
  std::string key = node.op + " " + std::string(runtime::dtypeName(w.dtype)) + runtime::shapeString(rest);
  for (const auto& [name, value] : node.attrs.values()) key += " " + name + "=" + printAttrValue(value);
  return key;
}

/// Byte concatenation of contiguous tensors along axis 0; `counts[i]` rows of `rowBytes` each
/// come from parts[i], or zeros when parts[i] is null.
runtime::Tensor concatRows(DType dtype, Shape shape, const std::vector<const runtime::Tensor*>& parts,
                           const std::vector<int64_t>& counts, size_t rowBytes) {
  int64_t rows = 0;
  for (int64_t c : counts) rows += c;
  shape[0] = rows;
  runtime::Tensor out = runtime::Tensor::zeros(dtype, shape);
  auto* dst = static_cast<char*>(out.raw());
  for (size_t i = 0; i < parts.size(); ++i) {
    size_t bytes = static_cast<size_t>(counts[i]) * rowBytes;
    if (parts[i]) std::memcpy(dst, parts[i]->raw(), bytes);
    dst += bytes;
  }
  return out;
}

struct Merge {
  std::vector<NodeId> members;  // in node order; the first is where the wide op goes
};

class Merger {
 public:
  Merger(const Graph& graph, PassCounters* counters) : m_graph(graph), m_counters(counters) {}

  bool run(Graph& out) {
    findMerges();
    if (m_merges.empty()) return false;
    GraphRewriter rw(m_graph);
    for (NodeId n = 0; n < static_cast<NodeId>(m_graph.nodes().size()); ++n) {
      auto head = m_headOf.find(n);
      if (head == m_headOf.end()) {
        rw.copyNode(n);
        continue;
      }
      if (head->second >= 0) emit(rw, m_merges[head->second]);
    }
    out = rw.finish();
    return true;
  }

 private:
  void findMerges() {
    std::map<std::pair<ValueId, std::string>, std::vector<NodeId>> classes;
    std::vector<std::pair<ValueId, std::string>> order;
    for (NodeId n = 0; n < static_cast<NodeId>(m_graph.nodes().size()); ++n) {
      const Node& node = m_graph.node(n);
      std::string key = siblingKey(m_graph, node);
      if (key.empty()) continue;
      auto cls = std::make_pair(node.inputs[0], key);
      auto [it, inserted] = classes.try_emplace(cls);
      if (inserted) order.push_back(cls);
      it->second.push_back(n);
    }
    for (const auto& cls : order) {
      const std::vector<NodeId>& members = classes[cls];
      if (members.size() < 2) continue;
      m_headOf[members[0]] = static_cast<int>(m_merges.size());
      for (size_t i = 1; i < members.size(); ++i) m_headOf[members[i]] = -1;
      m_merges.push_back({members});
    }
  }

  void emit(GraphRewriter& rw, const Merge& merge) {
    const Node& head = m_graph.node(merge.members[0]);
    const TensorType& w0 = m_graph.type(head.inputs[1]);
    bool anyBias = false;
    std::vector<const runtime::Tensor*> weights, biases;
    std::vector<int64_t> outChannels;  // per member, along weight axis 0
    for (NodeId m : merge.members) {
      const Node& node = m_graph.node(m);
      weights.push_back(&*m_graph.value(node.inputs[1]).constant);
      outChannels.push_back(m_graph.type(node.inputs[1]).shape[0]);
      bool hasBias = node.inputs.size() == 3;
      biases.push_back(hasBias ? &*m_graph.value(node.inputs[2]).constant : nullptr);
      anyBias = anyBias || hasBias;
    }
    size_t weightRow = static_cast<size_t>(w0.numel() / w0.shape[0]) * runtime::dtypeSize(w0.dtype);
    std::string stem = m_graph.value(head.outputs[0]).name + "_merged";
    std::vector<ValueId> inputs = {
        rw.map(head.inputs[0]),
        rw.addConstant(stem + "_weight", concatRows(w0.dtype, w0.shape, weights, outChannels, weightRow))};
    if (anyBias) {
      // Bias lengths are output channels; packed weights count output blocks of y along axis 0.
      int64_t perRow = head.op == "conv2d_nchwc" ? w0.shape[5] : 1;
      std::vector<int64_t> biasCounts;
      for (int64_t c : outChannels) biasCounts.push_back(c * perRow);
      const TensorType& anyBiasType = m_graph.type(m_graph.node(merge.members[biasIndex(biases)]).inputs[2]);
      inputs.push_back(
          rw.addConstant(stem + "_bias", concatRows(anyBiasType.dtype, anyBiasType.shape, biases, biasCounts,
                                                    runtime::dtypeSize(anyBiasType.dtype))));
    }
    ValueId wide = rw.addNode(head.op, inputs, head.attrs, head.location, stem);
    const Shape wideShape = rw.target().type(wide).shape;  // a copy: adding nodes moves values
    int64_t axis = head.op == "dense" ? static_cast<int64_t>(wideShape.size()) - 1 : 1;
    int64_t begin = 0;
    for (NodeId m : merge.members) {
      const Node& node = m_graph.node(m);
      int64_t extent = m_graph.type(node.outputs[0]).shape[axis];
      std::vector<int64_t> b(wideShape.size(), 0), e = wideShape, s(wideShape.size(), 1);
      b[axis] = begin;
      e[axis] = begin + extent;
      Attrs attrs;
      attrs.set("begin", b);
      attrs.set("end", e);
      attrs.set("strides", s);
      rw.replaceWithNode(node.outputs[0], "strided_slice", {wide}, attrs, node.location);
      begin += extent;
    }
    KILN_ASSERT(begin == wideShape[axis], "merge-parallel: the slices do not cover the merged output");
    bump(m_counters, "merged");
    bump(m_counters, head.op == "dense" ? "dense" : "convs", static_cast<int64_t>(merge.members.size()));
  }

  static size_t biasIndex(const std::vector<const runtime::Tensor*>& biases) {
    for (size_t i = 0; i < biases.size(); ++i)
      if (biases[i]) return i;
    return 0;
  }

  const Graph& m_graph;
  PassCounters* m_counters;
  std::vector<Merge> m_merges;
  std::map<NodeId, int> m_headOf;  // first member → merge index; other members → -1
};

}  // namespace

bool mergeParallel(Graph& graph, PassCounters* counters) {
  if (!graph.groups().empty()) return false;  // fused groups would be lost: run before fuse-ops
  Graph merged;
  if (!Merger(graph, counters).run(merged)) return false;
  graph = std::move(merged);
  return true;
}

}  // namespace kiln::core::passes

#include "core/passes/fold_pad_into_conv.h"

#include <optional>
#include <vector>

#include "core/passes/rewrite.h"

namespace kiln::core::passes {
namespace {

/// The (ph, pw) a conv2d can take over from pad node `n`, or nullopt.
std::optional<std::vector<int64_t>> foldablePadding(const Graph& graph, const Node& n) {
  if (n.op != "pad" || n.attrs.getString("mode") != "constant" || n.attrs.getFloat("value", 0.0) != 0.0)
    return std::nullopt;
  if (graph.type(n.inputs[0]).rank() != 4) return std::nullopt;
  const auto& pads = n.attrs.getInts("pads");  // [N, C, H, W before, N, C, H, W after]
  if (pads[0] != 0 || pads[1] != 0 || pads[4] != 0 || pads[5] != 0) return std::nullopt;
  if (pads[2] != pads[6] || pads[3] != pads[7] || pads[2] < 0 || pads[3] < 0) return std::nullopt;
  return std::vector<int64_t>{pads[2], pads[3]};
}

}  // namespace

bool foldPadIntoConv(Graph& graph, PassCounters* counters) {
  const auto numNodes = static_cast<NodeId>(graph.nodes().size());
  std::vector<std::optional<std::vector<int64_t>>> padOf(numNodes);  // per conv2d: the pad it takes over
  for (NodeId n = 0; n < numNodes; ++n) {
    const Node& node = graph.node(n);
    if (node.op != "conv2d") continue;
    NodeId p = graph.value(node.inputs[0]).producer;
    if (p >= 0) padOf[n] = foldablePadding(graph, graph.node(p));
  }
  // A pad disappears when every use is a folded convolution's input (never its weight or bias).
  std::vector<std::vector<NodeId>> uses = valueUses(graph);
  std::vector<bool> drop(numNodes, false);
  bool any = false;
  for (NodeId n = 0; n < numNodes; ++n) {
    const Node& node = graph.node(n);
    if (!padOf[n]) continue;
    any = true;
    ValueId padded = node.inputs[0];
    NodeId p = graph.value(padded).producer;
    if (isGraphOutput(graph, padded)) continue;
    bool allFolded = true;
    for (NodeId u : uses[padded]) {
      const Node& user = graph.node(u);
      for (size_t i = 1; i < user.inputs.size(); ++i) allFolded = allFolded && user.inputs[i] != padded;
      allFolded = allFolded && padOf[u].has_value();
    }
    drop[p] = allFolded;
  }
  if (!any) return false;

  GraphRewriter rw(graph);
  for (NodeId n = 0; n < numNodes; ++n) {
    const Node& node = graph.node(n);
    if (drop[n]) {
      bump(counters, "pads-removed");
      continue;
    }
    if (!padOf[n]) {
      rw.copyNode(n);
      continue;
    }
    const Node& pad = graph.node(graph.value(node.inputs[0]).producer);
    std::vector<int64_t> padding = node.attrs.getPair("padding", 0);
    padding[0] += (*padOf[n])[0];
    padding[1] += (*padOf[n])[1];
    Attrs attrs = node.attrs;
    attrs.set("padding", padding);
    std::vector<ValueId> inputs{rw.map(pad.inputs[0])};
    for (size_t i = 1; i < node.inputs.size(); ++i) inputs.push_back(rw.map(node.inputs[i]));
    rw.replaceWithNode(node.outputs[0], "conv2d", std::move(inputs), std::move(attrs), node.location);
    bump(counters, "convolutions");
  }
  graph = rw.finish();
  return true;
}

}  // namespace kiln::core::passes

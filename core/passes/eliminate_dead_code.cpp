#include "core/passes/eliminate_dead_code.h"

#include <vector>

#include "core/passes/rewrite.h"

namespace kiln::core::passes {

bool eliminateDeadCode(Graph& graph, PassCounters* counters) {
  // Liveness backwards from the outputs: nodes come in topological order, so one reverse sweep
  // sees every user before its producers.
  std::vector<bool> liveValue(graph.values().size(), false);
  for (ValueId v : graph.outputs()) liveValue[v] = true;
  auto numNodes = static_cast<NodeId>(graph.nodes().size());
  std::vector<bool> liveNode(graph.nodes().size(), false);
  for (NodeId n = numNodes; n-- > 0;) {
    const Node& node = graph.node(n);
    for (ValueId out : node.outputs) liveNode[n] = liveNode[n] || liveValue[out];
    if (!liveNode[n]) continue;
    for (ValueId in : node.inputs) liveValue[in] = true;
  }
  int64_t deadNodes = 0, deadConstants = 0;
  for (NodeId n = 0; n < numNodes; ++n) deadNodes += !liveNode[n];
  for (ValueId v = 0; v < static_cast<ValueId>(graph.values().size()); ++v)
    deadConstants += graph.value(v).isConstant() && !liveValue[v];
  if (deadNodes == 0 && deadConstants == 0) return false;

  GraphRewriter rw(graph);
  for (NodeId n = 0; n < numNodes; ++n) {
    if (liveNode[n]) rw.copyNode(n);
  }
  graph = rw.finish();
  bump(counters, "nodes-removed", deadNodes);
  bump(counters, "constants-removed", deadConstants);
  return true;
}

}  // namespace kiln::core::passes

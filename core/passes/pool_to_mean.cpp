#include "core/passes/pool_to_mean.h"

#include <vector>

#include "core/passes/rewrite.h"

namespace kiln::core::passes {
namespace {

/// An average pool of a rank-4 float input whose single window covers each whole H×W plane.
bool isGlobalAverage(const Graph& graph, const Node& node) {
  const TensorType& x = graph.type(node.inputs[0]);
  if (x.rank() != 4 || (x.dtype != DType::Float32 && x.dtype != DType::Float64)) return false;
  if (node.op == "adaptive_avg_pool2d")
    return node.attrs.getPair("output_size", 1) == std::vector<int64_t>{1, 1};
  if (node.op != "avg_pool2d") return false;
  const Shape& out = graph.type(node.outputs[0]).shape;
  return node.attrs.getPair("kernel", 1) == std::vector<int64_t>{x.shape[2], x.shape[3]} &&
         node.attrs.getPair("padding", 0) == std::vector<int64_t>{0, 0} && out[2] == 1 && out[3] == 1;
}

}  // namespace

bool poolToMean(Graph& graph, PassCounters* counters) {
  bool any = false;
  for (const Node& node : graph.nodes()) any = any || isGlobalAverage(graph, node);
  if (!any) return false;
  GraphRewriter rw(graph);
  for (NodeId n = 0; n < static_cast<NodeId>(graph.nodes().size()); ++n) {
    const Node& node = graph.node(n);
    if (!isGlobalAverage(graph, node)) {
      rw.copyNode(n);
      continue;
    }
    rw.replaceWithNode(node.outputs[0], "mean", {rw.map(node.inputs[0])},
                       Attrs{{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t{1}}}, node.location);
    bump(counters, "pools");
  }
  graph = rw.finish();
  return true;
}

}  // namespace kiln::core::passes

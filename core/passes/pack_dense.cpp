#include "core/passes/pack_dense.h"

#include "core/passes/rewrite.h"
#include "runtime/error.h"

namespace kiln::core::passes {
namespace {

/// The panel width for dense or matmul node `node`, or 0 when it stays as it is.
int64_t panelWidth(const Graph& graph, const Node& node, const PackDenseOptions& options) {
  if ((node.op != "dense" && node.op != "matmul") || options.lanes < 1) return 0;
  const TensorType& x = graph.type(node.inputs[0]);
  const Value& w = graph.value(node.inputs[1]);
  if (x.dtype != DType::Float32 || !w.isConstant() || w.type.dtype != DType::Float32) return 0;
  // matmul(x [..., M, K], w [K, N]) is a dense layer when w is one matrix (an ONNX MatMul).
  if (node.op == "matmul" && (x.rank() < 2 || w.type.rank() != 2)) return 0;
  if (node.inputs.size() == 3 && !graph.value(node.inputs[2]).isConstant()) return 0;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < x.shape.size(); ++d) rows *= x.shape[d];
  if (rows < options.minRows) return 0;
  const int64_t n = node.op == "dense" ? w.type.shape[0] : w.type.shape[1];
  for (int v = options.maxVectors; v >= 1; --v)
    if (n % (int64_t{v} * options.lanes) == 0) return int64_t{v} * options.lanes;
  return 0;
}

/// w [K, N] → wᵀ [N, K].
runtime::Tensor transposed(const runtime::Tensor& w) {
  const int64_t k = w.shape()[0], n = w.shape()[1];
  runtime::Tensor t = runtime::Tensor::zeros(DType::Float32, {n, k});
  const float* src = w.data<float>();
  float* dst = t.data<float>();
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j) dst[j * k + i] = src[i * n + j];
  return t;
}

}  // namespace

runtime::Tensor packDenseWeight(const runtime::Tensor& w, int64_t panel) {
  KILN_ASSERT(w.shape().size() == 2 && w.dtype() == DType::Float32 && panel > 0 && w.shape()[0] % panel == 0,
              "packDenseWeight: expects f32 [N, K] with the panel width dividing N");
  const int64_t n = w.shape()[0], k = w.shape()[1];
  runtime::Tensor packed = runtime::Tensor::zeros(DType::Float32, {n / panel, k, panel});
  const float* src = w.data<float>();
  float* dst = packed.data<float>();
  for (int64_t row = 0; row < n; ++row)
    for (int64_t j = 0; j < k; ++j) dst[((row / panel) * k + j) * panel + row % panel] = src[row * k + j];
  return packed;
}

bool packDense(Graph& graph, const PackDenseOptions& options, PassCounters* counters) {
  const auto numNodes = static_cast<NodeId>(graph.nodes().size());
  bool any = false;
  for (NodeId n = 0; n < numNodes && !any; ++n) any = panelWidth(graph, graph.node(n), options) > 0;
  if (!any) return false;

  GraphRewriter rw(graph);
  for (NodeId n = 0; n < numNodes; ++n) {
    const Node& node = graph.node(n);
    const int64_t panel = panelWidth(graph, node, options);
    if (panel == 0) {
      rw.copyNode(n);
      continue;
    }
    const Value& w = graph.value(node.inputs[1]);
    runtime::Tensor rows = node.op == "dense" ? *w.constant : transposed(*w.constant);
    std::vector<ValueId> inputs{rw.map(node.inputs[0]), rw.addConstant(w.name + "_packed", packDenseWeight(rows, panel))};
    if (node.inputs.size() == 3) inputs.push_back(rw.map(node.inputs[2]));
    rw.replaceWithNode(node.outputs[0], "dense_packed", std::move(inputs), {}, node.location);
    bump(counters, node.op.c_str());
  }
  graph = rw.finish();
  return true;
}

}  // namespace kiln::core::passes

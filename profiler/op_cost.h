// What each call of a compiled graph computes and costs: the original graph operators inside it,
// its input/output shapes, floating-point operations and bytes moved. Used to turn the debug
// executor's timings into a readable per-operator profile.
//
// FLOP conventions (a multiply-add counts as 2):
//   conv2d, conv2d_nchwc   2 · N·OH·OW · |w|  (|w| = OC·IC/groups·KH·KW in any weight layout, the
//            output's axes 0, 2, 3 being N, OH, OW in NCHW and NCHW[x]c; + |out| for a bias)
//   dense    2 · |out| · K            matmul  2 · |out| · K   (K: the reduced extent)
//   batch_norm 2 per element          unary/binary/clamp: 1 per output element
//   max/avg_pool2d |out| · KH·KW      adaptive_avg_pool2d, mean, sum: |in|
//   softmax 5 per element             reshape/transpose/concat/copy/layout transforms: 0
// Bytes moved: every input buffer (weights included) plus every output buffer, read/written once.
#pragma once

#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "runtime/graph_plan.h"

namespace kiln::profiler {

/// FLOPs of one operator application; 0 for data movement and unknown operators.
double opFlops(const std::string& op, const core::Attrs& attrs, const std::vector<core::TensorType>& in,
               const std::vector<core::TensorType>& out);

/// The operators a kernel symbol names: "fused_conv2d_add_relu_3" → {conv2d, add, relu},
/// "max_pool2d_0" → {max_pool2d}. Matches registry operator names greedily (longest first).
std::vector<std::string> opsFromKernelName(const std::string& kernel);

struct CallCost {
  std::vector<std::string> ops;  // graph operators inside the call, in graph order
  std::string key;               // output value name(s)
  std::vector<std::string> inputShapes;
  std::string outputShape;
  double flops = 0;
  double bytes = 0;
};

/// One entry per plan call. Operators come from the graph nodes the call computes: the producer
/// of each output value, the other members of its fused group (Graph::groups()), and producers of
/// values that have no slot in the plan (they live inside the function). When the graph does not know the
/// outputs, the kernel name is used instead and FLOPs are estimated from the call's buffers.
std::vector<CallCost> describeCalls(const core::Graph& graph, const runtime::GraphPlan& plan);

}  // namespace kiln::profiler

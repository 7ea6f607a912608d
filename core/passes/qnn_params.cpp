#include "core/passes/qnn_params.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace kiln::core::passes {

std::optional<QuantParams> quantParamsOf(const Graph& graph, ValueId v) {
  for (;;) {
    if (graph.type(v).dtype != DType::UInt8) return std::nullopt;
    NodeId p = graph.value(v).producer;
    if (p < 0) return std::nullopt;
    const Node& node = graph.node(p);
    const std::string& op = node.op;
    if (op.rfind("qnn.", 0) == 0) {
      if (!node.attrs.has("output_scale") || !node.attrs.has("output_zero_point")) return std::nullopt;
      return QuantParams{node.attrs.getFloat("output_scale"), node.attrs.getInt("output_zero_point")};
    }
    if (op != "max_pool2d" && op != "reshape" && op != "copy" && op != "transpose" && op != "layout_transform" &&
        op != "strided_slice")
      return std::nullopt;
    v = node.inputs[0];
  }
}

int64_t requantizeValue(int64_t q, const QuantParams& from, const QuantParams& to) {
  double real = static_cast<double>(q - from.zeroPoint) * from.scale;
  double r = std::nearbyint(real / to.scale) + static_cast<double>(to.zeroPoint);
  return static_cast<int64_t>(std::clamp(r, 0.0, 255.0));
}

}  // namespace kiln::core::passes

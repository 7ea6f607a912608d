// Quantization parameters of the values of a graph in the quantized dialect (qnn.*, see
// core/ir/op_registry.h). A u8 value carries one scale and zero point; they are not part of its
// type but follow from its producer: the output_scale / output_zero_point attributes of the qnn
// op that computed it, or, through ops that only move or select elements (max_pool2d, reshape,
// copy, transpose, layout_transform, strided_slice), the parameters of their input.
#pragma once

#include <cstdint>
#include <optional>

#include "core/ir/graph.h"

namespace kiln::core::passes {

struct QuantParams {
  double scale = 1.0;
  int64_t zeroPoint = 0;
};

/// The parameters of u8 value `v`, or nullopt when its producer does not define them (a graph
/// input or constant, or an op that computes new values without requantizing).
std::optional<QuantParams> quantParamsOf(const Graph& graph, ValueId v);

/// (x − zeroPoint) · scale rounded to the nearest u8 (ties to even) under `to`.
int64_t requantizeValue(int64_t q, const QuantParams& from, const QuantParams& to);

}  // namespace kiln::core::passes

// Deterministic text form of a Graph. Values print in definition order, attributes sorted by
// name, floats with round-trip precision, so parse(print(g)) == g (core/ir/parser.h).
//
//   graph(%x: f32[1,3,8,8]) {
//     %w = constant f32[2,3,1,1] [0.5, -1, ...]
//     %conv2d = conv2d(%x, %w) {groups=1, padding=[0,0]} : f32[1,2,8,8] loc("m.py:3")
//     return %conv2d
//   }
//
// Fused groups (graph.h) wrap their consecutive nodes:
//
//     group @fused_conv2d_relu_0 {
//       %conv2d = conv2d(%x, %w) {...} : f32[1,2,8,8]
//       %relu = relu(%conv2d) : f32[1,2,8,8]
//     }
//
// Large constants print as `constant f32[...] elided` unless PrintOptions::fullConstants; an
// elided constant parses back as zeros.
#pragma once

#include <string>

#include "core/ir/graph.h"

namespace kiln::core {

struct PrintOptions {
  bool fullConstants = false;   // print every constant's data
  int64_t inlineLimit = 16;     // otherwise constants up to this many elements are inline
  bool locations = true;        // print loc("...") suffixes
};

std::string printGraph(const Graph& graph, const PrintOptions& options = {});
std::string printAttrValue(const AttrValue& value);

}  // namespace kiln::core

// alter-layout (O3): rewrites convolutions with constant weights to the packed NCHW[x]c layout
// (activations [N, C/x, H, W, x], weights pre-packed at compile time to [O/y, I/x, KH, KW, x, y]),
// keeps elementwise/broadcast ops that follow in the packed layout, and inserts layout
// transforms only where a packed tensor meets an op that needs plain NCHW (graph edges, dense,
// reshape). Lanes come from the target's vector width (8 for AVX2 f32, 16 for AVX-512).
#pragma once

#include "core/ir/graph.h"

namespace kiln::core::passes {

struct AlterLayoutOptions {
  int lanes = 8;  // x: the channel block, normally the f32 vector width of the target
};

/// Returns true when the graph changed. The graph computes the same values (up to float
/// reassociation) at its outputs, in the same layouts.
bool alterLayout(Graph& graph, const AlterLayoutOptions& options = {});

}  // namespace kiln::core::passes

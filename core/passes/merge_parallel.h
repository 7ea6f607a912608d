// merge-parallel (O4): convolutions (conv2d, packed conv2d_nchwc) with groups 1, and dense ops,
// that read the same input with the same attributes and the same weight shape apart from the
// output channels become one op over weights (and biases) concatenated along the output
// channels, followed by one strided_slice per original op that hands its channels back to its
// consumers. The algorithm and when merging pays are explained at the top of merge_parallel.cpp.
//
// Weights and biases must be constants (the concatenation happens at compile time); a missing
// bias next to present ones becomes zeros. Run it after fold-scale-axis (which needs each
// convolution's own per-channel chain) and after alter-layout (so packed convolutions merge in
// their packed layout and no layout transform lands between the merged op and its slices), and
// before fuse-ops (the slices fuse with the element ops after them).
#pragma once

#include "core/ir/graph.h"
#include "core/passes/pass_registry.h"

namespace kiln::core::passes {

/// Returns true when ops were merged. Counters: "merged" (wide ops created), "convs" and
/// "dense" (original ops replaced by slices of a wide op).
bool mergeParallel(Graph& graph, PassCounters* counters = nullptr);

}  // namespace kiln::core::passes

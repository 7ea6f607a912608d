// inline-control-flow (O1): control flow whose path is known at compile time becomes straight-line
// code, as tracing would have recorded it.
// - An `if` whose condition is a constant is replaced by the nodes of the branch it takes.
// - A `loop` with a constant trip count whose condition is known before every iteration (a
//   constant at the start, and in the body an output that is a constant, as fold-constants leaves
//   `i < 3` or `True`) is unrolled: the body's nodes once per iteration, the index bound to a
//   constant. A loop that never runs passes its initial values through. Loops over more than
//   `max-trip` iterations, or whose unrolled body would exceed `max-nodes`, stay loops.
// Regions are optimized before the graph that holds them (core/compile.cpp), so the inlined nodes
// arrive folded; what they compute from the new constants (the loop index) is folded again here.
#pragma once

#include <cstdint>

#include "core/ir/graph.h"
#include "core/passes/pass_registry.h"

namespace kiln::core::passes {

struct InlineControlFlowOptions {
  int64_t maxTrip = 64;     // the most iterations a loop is unrolled for
  int64_t maxNodes = 4096;  // the most nodes one unrolled loop may add
};

/// Returns true when a node was inlined. Counters: "ifs-inlined", "loops-unrolled",
/// "iterations".
bool inlineControlFlow(Graph& graph, const InlineControlFlowOptions& options = {}, PassCounters* counters = nullptr);

}  // namespace kiln::core::passes

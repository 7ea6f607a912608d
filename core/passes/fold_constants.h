// fold-constants (O1): a node whose inputs are all constants is evaluated at compile time and
// replaced by a constant holding its result. Evaluation reuses the compiler itself: the node is
// lowered like any other (core/lower/lower.h lowerNode) and the loop IR is run by the reference
// interpreter (core/lower/interpreter.h), so folding can never disagree with compiled code about
// an operator's semantics.
//
// A fold is skipped when its result would be large and larger than its inputs together (a
// broadcast of a scalar to a big tensor is cheaper to compute than to store and load), and when
// the node cannot be lowered (the error is then reported by the real lowering).
#pragma once

#include <cstdint>

#include "core/ir/graph.h"
#include "core/passes/pass_registry.h"

namespace kiln::core::passes {

struct FoldConstantsOptions {
  /// Results with more elements than this are folded only when they are not larger than the
  /// node's inputs together.
  int64_t maxElements = int64_t{1} << 16;
};

/// Returns true when a node was folded. Counters: "folded", "skipped-size",
/// "skipped-unsupported".
bool foldConstants(Graph& graph, const FoldConstantsOptions& options = {}, PassCounters* counters = nullptr);

}  // namespace kiln::core::passes

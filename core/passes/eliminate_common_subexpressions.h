// eliminate-common-subexpressions (O1): nodes that apply the same operator with the same
// attributes to the same inputs compute the same values, so only the first is kept and the
// others' uses are redirected to it. Constants with the same dtype, shape and bytes are merged
// first, so nodes over duplicated weights also meet. Source locations do not matter.
#pragma once

#include "core/ir/graph.h"
#include "core/passes/pass_registry.h"

namespace kiln::core::passes {

/// Returns true when a node or constant was merged. Counters: "nodes-merged",
/// "constants-merged".
bool eliminateCommonSubexpressions(Graph& graph, PassCounters* counters = nullptr);

}  // namespace kiln::core::passes

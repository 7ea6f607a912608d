// eliminate-dead-code (O1): removes nodes none of whose outputs reach a graph output, and
// constants no remaining node uses. Graph inputs always stay (they are the model's signature).
#pragma once

#include "core/ir/graph.h"
#include "core/passes/pass_registry.h"

namespace kiln::core::passes {

/// Returns true when a node or a constant was removed. Counters: "nodes-removed",
/// "constants-removed".
bool eliminateDeadCode(Graph& graph, PassCounters* counters = nullptr);

}  // namespace kiln::core::passes

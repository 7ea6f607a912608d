// The graph verifier: checks the invariants every pass must preserve. The pass manager runs it
// after each pass when asked to (tests and `kiln ir --verify` do), so a broken rewrite is reported
// next to the pass that made it instead of as wrong numbers at the end.
//
// Checked:
// - value bookkeeping: producers, output indices and input positions agree with the nodes;
//   value names are unique; graph outputs are valid values;
// - topological order: every node input is a graph input, a constant or an earlier node's output;
// - types: re-running the operator registry's inference on each node's input types and
//   attributes (and sub-graphs) gives exactly the recorded output types;
// - sub-graphs of if/loop nodes: each valid in turn;
// - fused groups: contiguous node ranges that agree with Node::group, unique names, and only the
//   root (last node) has outputs used outside the group or returned by the graph.
#pragma once

#include <string>
#include <vector>

#include "core/ir/graph.h"

namespace kiln::core::passes {

/// Every violated invariant, one line each ("node 3 (%relu): input %x is defined later"); empty
/// when the graph is valid.
std::vector<std::string> verifyGraph(const Graph& graph);

/// Throws kiln::InternalError listing the problems (prefixed with `context`) unless the graph is
/// valid.
void verifyGraphOrThrow(const Graph& graph, const std::string& context);

}  // namespace kiln::core::passes

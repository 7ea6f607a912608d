// Graph rewriting support shared by the graph passes.
//
// core::Graph is append-only (nodes are added in topological order and never removed), so a pass
// that removes or replaces nodes builds a new graph from the old one. GraphRewriter does the
// bookkeeping: it copies the inputs up front, copies constants on first use (constants nothing
// uses any more simply disappear), copies or replaces nodes on request while keeping value names
// and source locations, and maps the outputs at the end. Fused groups are not carried over: the
// passes that rewrite run before fuse-ops (core/passes/fuse_ops.h), which builds the groups.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/ir/graph.h"

namespace kiln::core::passes {

class GraphRewriter {
 public:
  explicit GraphRewriter(const Graph& source);

  const Graph& source() const { return m_source; }
  Graph& target() { return m_target; }

  /// The target value standing for source value `v`. Copies a source constant on first use.
  /// InternalError when `v`'s producer was neither copied nor replaced yet.
  ValueId map(ValueId v);
  /// Makes source value `v` stand for target value `replacement`.
  void replace(ValueId v, ValueId replacement);

  /// Copies source node `n` with its inputs mapped (same op, attributes, location and value
  /// names) and records the mapping of its outputs. Returns the new outputs.
  std::vector<ValueId> copyNode(NodeId n);
  /// Adds a new node to the target; its single output gets a fresh name from `stem` that no
  /// source value uses (so later copies keep their names).
  ValueId addNode(const std::string& op, std::vector<ValueId> inputs, Attrs attrs,
                  const std::string& location, const std::string& stem);
  /// Adds a new constant with a fresh name from `stem`.
  ValueId addConstant(const std::string& stem, runtime::Tensor data);
  /// Source value `v` becomes a new constant holding `data`, under v's name.
  ValueId replaceWithConstant(ValueId v, runtime::Tensor data);
  /// Source value `v` becomes the single output of a new node, under v's name.
  ValueId replaceWithNode(ValueId v, const std::string& op, std::vector<ValueId> inputs, Attrs attrs,
                          const std::string& location);
  /// Adds the nodes of `region` (a sub-graph of an if/loop node) to the target with its inputs
  /// bound to `args` (target values): its constants copied, its values under fresh names derived
  /// from theirs, nested regions shared. Returns the target values of the region's outputs.
  std::vector<ValueId> inlineRegion(const Graph& region, const std::vector<ValueId>& args);
  /// A name derived from `stem` that neither the source nor the target uses.
  std::string freshName(const std::string& stem);

  /// Maps the source outputs and returns the finished graph (the rewriter is spent).
  Graph finish();

 private:
  const Graph& m_source;
  Graph m_target;
  std::vector<ValueId> m_map;  // source value id → target value id, -1 when not mapped
  std::set<std::string> m_taken;
};

/// For every value, the nodes that use it (in node order; a node using a value twice is listed
/// twice).
std::vector<std::vector<NodeId>> valueUses(const Graph& graph);

/// True when `v` is one of the graph's outputs.
bool isGraphOutput(const Graph& graph, ValueId v);

}  // namespace kiln::core::passes

#include "core/passes/eliminate_common_subexpressions.h"

#include <cstring>
#include <map>
#include <string>
#include <string_view>

#include "core/ir/printer.h"
#include "core/passes/rewrite.h"

namespace kiln::core::passes {
namespace {

/// Constants equal to an earlier constant: value → the earlier one.
std::map<ValueId, ValueId> duplicateConstants(const Graph& graph) {
  std::map<std::string, std::vector<ValueId>> byType;  // candidates by "dtype[shape]"
  std::map<ValueId, ValueId> duplicates;
  for (ValueId v = 0; v < static_cast<ValueId>(graph.values().size()); ++v) {
    const Value& value = graph.value(v);
    if (!value.isConstant()) continue;
    auto& candidates = byType[value.type.str()];
    const runtime::Tensor& t = *value.constant;
    for (ValueId c : candidates) {
      const runtime::Tensor& other = *graph.value(c).constant;
      if (std::memcmp(t.raw(), other.raw(), t.nbytes()) == 0) {
        duplicates[v] = c;
        break;
      }
    }
    if (!duplicates.count(v)) candidates.push_back(v);
  }
  return duplicates;
}

std::string nodeKey(const Node& node, const std::vector<ValueId>& mappedInputs) {
  std::string key = node.op + "(";
  for (ValueId v : mappedInputs) key += std::to_string(v) + ",";
  key += ")";
  for (const auto& [name, value] : node.attrs.values()) key += name + "=" + printAttrValue(value) + ";";
  for (const Region& r : node.regions) key += "region@" + std::to_string(reinterpret_cast<uintptr_t>(r.get())) + ";";
  return key;
}

}  // namespace

bool eliminateCommonSubexpressions(Graph& graph, PassCounters* counters) {
  std::map<ValueId, ValueId> dupConstants = duplicateConstants(graph);
  GraphRewriter rw(graph);
  for (const auto& [dup, original] : dupConstants) rw.replace(dup, rw.map(original));

  std::map<std::string, NodeId> seen;  // key → source node computing it
  int64_t merged = 0;
  for (NodeId n = 0; n < static_cast<NodeId>(graph.nodes().size()); ++n) {
    const Node& node = graph.node(n);
    std::vector<ValueId> inputs;
    for (ValueId v : node.inputs) inputs.push_back(rw.map(v));
    auto [it, inserted] = seen.emplace(nodeKey(node, inputs), n);
    if (inserted) {
      rw.copyNode(n);
      continue;
    }
    const Node& original = graph.node(it->second);
    for (size_t i = 0; i < node.outputs.size(); ++i) rw.replace(node.outputs[i], rw.map(original.outputs[i]));
    ++merged;
  }
  if (merged == 0 && dupConstants.empty()) return false;
  graph = rw.finish();
  bump(counters, "nodes-merged", merged);
  bump(counters, "constants-merged", static_cast<int64_t>(dupConstants.size()));
  return true;
}

}  // namespace kiln::core::passes

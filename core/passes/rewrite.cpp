#include "core/passes/rewrite.h"

#include <algorithm>

#include "runtime/error.h"

namespace kiln::core::passes {

GraphRewriter::GraphRewriter(const Graph& source) : m_source(source), m_map(source.values().size(), -1) {
  for (const Value& v : source.values()) m_taken.insert(v.name);
  for (ValueId in : source.inputs()) {
    const Value& v = source.value(in);
    m_map[in] = m_target.addInput(v.name, v.type);
  }
}

ValueId GraphRewriter::map(ValueId v) {
  KILN_ASSERT(v >= 0 && v < static_cast<ValueId>(m_map.size()), "GraphRewriter::map: bad value id");
  if (m_map[v] >= 0) return m_map[v];
  const Value& value = m_source.value(v);
  KILN_ASSERT(value.isConstant(),
              "GraphRewriter: %" + value.name + " is used before its producer was rewritten");
  m_map[v] = m_target.addConstant(value.name, *value.constant);
  return m_map[v];
}

void GraphRewriter::replace(ValueId v, ValueId replacement) {
  KILN_ASSERT(replacement >= 0 && replacement < static_cast<ValueId>(m_target.values().size()),
              "GraphRewriter::replace: bad target value");
  m_map.at(v) = replacement;
}

std::vector<ValueId> GraphRewriter::copyNode(NodeId n) {
  const Node& node = m_source.node(n);
  std::vector<ValueId> inputs;
  for (ValueId v : node.inputs) inputs.push_back(map(v));
  std::vector<ValueId> outs = m_target.addNode(node.op, std::move(inputs), node.attrs, node.location,
                                               m_source.value(node.outputs[0]).name, node.regions);
  KILN_ASSERT(outs.size() == node.outputs.size(), "GraphRewriter: " + node.op + " changed its output count");
  for (size_t i = 0; i < outs.size(); ++i) m_map[node.outputs[i]] = outs[i];
  return outs;
}

std::string GraphRewriter::freshName(const std::string& stem) {
  std::string base = stem.empty() ? "v" : stem;
  std::string name = base;
  for (int i = 1; m_taken.count(name); ++i) name = base + "_" + std::to_string(i);
  m_taken.insert(name);
  return name;
}

std::vector<ValueId> GraphRewriter::inlineRegion(const Graph& region, const std::vector<ValueId>& args) {
  KILN_ASSERT(args.size() == region.inputs().size(), "GraphRewriter::inlineRegion: wrong number of arguments");
  std::vector<ValueId> map(region.values().size(), -1);
  for (size_t i = 0; i < args.size(); ++i) map[region.inputs()[i]] = args[i];
  auto mapped = [&](ValueId v) {
    if (map[v] < 0) {
      const Value& value = region.value(v);
      KILN_ASSERT(value.isConstant(), "GraphRewriter::inlineRegion: %" + value.name + " is used before it is defined");
      map[v] = addConstant(value.name, *value.constant);
    }
    return map[v];
  };
  for (const Node& node : region.nodes()) {
    std::vector<ValueId> inputs;
    for (ValueId v : node.inputs) inputs.push_back(mapped(v));
    std::vector<ValueId> outs = m_target.addNode(node.op, std::move(inputs), node.attrs, node.location,
                                                 freshName(region.value(node.outputs[0]).name), node.regions);
    KILN_ASSERT(outs.size() == node.outputs.size(), "GraphRewriter: " + node.op + " changed its output count");
    for (size_t i = 0; i < outs.size(); ++i) map[node.outputs[i]] = outs[i];
  }
  std::vector<ValueId> outputs;
  for (ValueId v : region.outputs()) outputs.push_back(mapped(v));
  return outputs;
}

ValueId GraphRewriter::addNode(const std::string& op, std::vector<ValueId> inputs, Attrs attrs,
                               const std::string& location, const std::string& stem) {
  std::vector<ValueId> outs =
      m_target.addNode(op, std::move(inputs), std::move(attrs), location, freshName(stem));
  KILN_ASSERT(outs.size() == 1, "GraphRewriter::addNode: " + op + " must have one output");
  return outs[0];
}

ValueId GraphRewriter::addConstant(const std::string& stem, runtime::Tensor data) {
  return m_target.addConstant(freshName(stem), std::move(data));
}

ValueId GraphRewriter::replaceWithConstant(ValueId v, runtime::Tensor data) {
  KILN_ASSERT(m_map.at(v) < 0, "GraphRewriter: %" + m_source.value(v).name + " is already mapped");
  m_map[v] = m_target.addConstant(m_source.value(v).name, std::move(data));
  return m_map[v];
}

ValueId GraphRewriter::replaceWithNode(ValueId v, const std::string& op, std::vector<ValueId> inputs,
                                       Attrs attrs, const std::string& location) {
  KILN_ASSERT(m_map.at(v) < 0, "GraphRewriter: %" + m_source.value(v).name + " is already mapped");
  std::vector<ValueId> outs =
      m_target.addNode(op, std::move(inputs), std::move(attrs), location, m_source.value(v).name);
  KILN_ASSERT(outs.size() == 1, "GraphRewriter::replaceWithNode: " + op + " must have one output");
  m_map[v] = outs[0];
  return outs[0];
}

Graph GraphRewriter::finish() {
  std::vector<ValueId> outputs;
  for (ValueId v : m_source.outputs()) outputs.push_back(map(v));
  m_target.setOutputs(std::move(outputs));
  return std::move(m_target);
}

std::vector<std::vector<NodeId>> valueUses(const Graph& graph) {
  std::vector<std::vector<NodeId>> uses(graph.values().size());
  for (NodeId n = 0; n < static_cast<NodeId>(graph.nodes().size()); ++n)
    for (ValueId v : graph.node(n).inputs) uses[v].push_back(n);
  return uses;
}

bool isGraphOutput(const Graph& graph, ValueId v) {
  return std::find(graph.outputs().begin(), graph.outputs().end(), v) != graph.outputs().end();
}

}  // namespace kiln::core::passes

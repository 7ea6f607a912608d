#include "core/ir/graph.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/ir/op_registry.h"
#include "runtime/error.h"

namespace kiln::core {

std::string TensorType::str() const {
  return std::string(runtime::dtypeName(dtype)) + runtime::shapeString(shape);
}

namespace {
template <typename T>
const T& getAs(const std::map<std::string, AttrValue>& m, const std::string& name) {
  auto it = m.find(name);
  KILN_ASSERT(it != m.end(), "missing attribute '" + name + "'");
  const T* v = std::get_if<T>(&it->second);
  KILN_ASSERT(v != nullptr, "attribute '" + name + "' has another type");
  return *v;
}
}  // namespace

int64_t Attrs::getInt(const std::string& name) const { return getAs<int64_t>(m_values, name); }
int64_t Attrs::getInt(const std::string& name, int64_t fallback) const {
  return has(name) ? getInt(name) : fallback;
}
double Attrs::getFloat(const std::string& name) const {
  auto it = m_values.find(name);
  KILN_ASSERT(it != m_values.end(), "missing attribute '" + name + "'");
  if (const auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  return getAs<double>(m_values, name);
}
double Attrs::getFloat(const std::string& name, double fallback) const {
  return has(name) ? getFloat(name) : fallback;
}
const std::string& Attrs::getString(const std::string& name) const {
  return getAs<std::string>(m_values, name);
}
const std::vector<int64_t>& Attrs::getInts(const std::string& name) const {
  return getAs<std::vector<int64_t>>(m_values, name);
}
std::vector<int64_t> Attrs::getPair(const std::string& name, int64_t fallback) const {
  if (!has(name)) return {fallback, fallback};
  const std::vector<int64_t>& v = getInts(name);
  if (v.size() == 1) return {v[0], v[0]};
  if (v.size() != 2) throw Error("attribute '" + name + "' must have 1 or 2 values", ErrorKind::InvalidModel);
  return v;
}

std::string Graph::uniqueName(const std::string& stem) {
  std::string base = stem.empty() ? "v" : stem;
  for (char& c : base) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') c = '_';
  }
  int& next = m_nextSuffix[base];
  std::string name = base;
  while (m_usedNames.count(name)) name = base + "_" + std::to_string(++next);
  m_usedNames.insert(name);
  return name;
}

ValueId Graph::newValue(const std::string& name, TensorType type) {
  Value v;
  v.name = uniqueName(name);
  v.type = std::move(type);
  m_values.push_back(std::move(v));
  return static_cast<ValueId>(m_values.size() - 1);
}

ValueId Graph::addInput(const std::string& name, TensorType type) {
  ValueId id = newValue(name, std::move(type));
  m_values[id].inputIndex = static_cast<int>(m_inputs.size());
  m_inputs.push_back(id);
  return id;
}

ValueId Graph::addConstant(const std::string& name, runtime::Tensor data) {
  ValueId id = newValue(name, TensorType{data.dtype(), data.shape()});
  m_values[id].constant = std::move(data);
  return id;
}

std::vector<ValueId> Graph::addNode(const std::string& op, std::vector<ValueId> inputs, Attrs attrs,
                                    const std::string& location, const std::string& outputName,
                                    std::vector<Region> regions) {
  std::string where = location.empty() ? "" : " (" + location + ")";
  const OpDef* def = findOp(op);
  if (!def) throw Error("operator '" + op + "' is not supported" + where, ErrorKind::Unsupported);
  int n = static_cast<int>(inputs.size());
  if (n < def->minInputs || n > def->maxInputs)
    throw Error(op + ": expected " + std::to_string(def->minInputs) +
                    (def->maxInputs != def->minInputs ? "-" + std::to_string(def->maxInputs) : "") +
                    " inputs, got " + std::to_string(n) + where,
                ErrorKind::InvalidModel);
  std::vector<TensorType> inTypes;
  for (ValueId v : inputs) {
    KILN_ASSERT(v >= 0 && v < static_cast<ValueId>(m_values.size()), "node input is not a graph value");
    inTypes.push_back(m_values[v].type);
  }
  std::vector<TensorType> outTypes;
  try {
    outTypes = inferTypes(*def, inTypes, attrs, regions);
  } catch (const InternalError&) {
    throw;
  } catch (const Error& e) {
    throw Error(op + ": " + e.what() + where, ErrorKind::InvalidModel);
  }
  Node node;
  node.op = op;
  node.inputs = std::move(inputs);
  node.attrs = std::move(attrs);
  node.location = location;
  node.regions = std::move(regions);
  NodeId nodeId = static_cast<NodeId>(m_nodes.size());
  for (size_t i = 0; i < outTypes.size(); ++i) {
    ValueId out = newValue(outputName.empty() ? op : outputName, outTypes[i]);
    m_values[out].producer = nodeId;
    m_values[out].outputIndex = static_cast<int>(i);
    node.outputs.push_back(out);
  }
  m_nodes.push_back(std::move(node));
  return m_nodes.back().outputs;
}

ValueId Graph::add(const std::string& op, std::vector<ValueId> inputs, Attrs attrs,
                   const std::string& location) {
  auto outs = addNode(op, std::move(inputs), std::move(attrs), location);
  KILN_ASSERT(outs.size() == 1, op + " does not have exactly one output");
  return outs[0];
}

void Graph::setOutputs(std::vector<ValueId> outputs) { m_outputs = std::move(outputs); }

void Graph::setRegions(NodeId node, std::vector<Region> regions) {
  Node& n = m_nodes.at(node);
  const OpDef* def = findOp(n.op);
  KILN_ASSERT(def && def->regions > 0, "setRegions: " + n.op + " has no sub-graphs");
  std::vector<TensorType> inTypes;
  for (ValueId v : n.inputs) inTypes.push_back(m_values[v].type);
  std::vector<TensorType> outTypes;
  try {
    outTypes = inferTypes(*def, inTypes, n.attrs, regions);
  } catch (const Error& e) {
    throw InternalError("setRegions: " + n.op + ": " + e.what());
  }
  for (size_t i = 0; i < n.outputs.size(); ++i)
    KILN_ASSERT(i < outTypes.size() && outTypes[i] == m_values[n.outputs[i]].type,
                "setRegions: the new sub-graphs of " + n.op + " change its output types");
  n.regions = std::move(regions);
}

int Graph::addGroup(const std::string& name, NodeId first, NodeId end) {
  KILN_ASSERT(!name.empty(), "a fused group needs a name");
  KILN_ASSERT(first >= 0 && first < end && end <= static_cast<NodeId>(m_nodes.size()),
              "fused group @" + name + ": node range [" + std::to_string(first) + ", " + std::to_string(end) +
                  ") is empty or out of range");
  for (const FusedGroup& g : m_groups) KILN_ASSERT(g.name != name, "fused group @" + name + " is defined twice");
  int index = static_cast<int>(m_groups.size());
  for (NodeId n = first; n < end; ++n) {
    KILN_ASSERT(m_nodes[n].group < 0, "fused group @" + name + ": node " + std::to_string(n) + " is already in @" +
                                          m_groups[m_nodes[n].group].name);
    m_nodes[n].group = index;
  }
  m_groups.push_back(FusedGroup{name, first, end});
  return index;
}

bool Graph::operator==(const Graph& other) const {
  if (m_inputs != other.m_inputs || m_outputs != other.m_outputs) return false;
  if (m_values.size() != other.m_values.size() || m_nodes.size() != other.m_nodes.size()) return false;
  for (size_t i = 0; i < m_values.size(); ++i) {
    const Value& a = m_values[i];
    const Value& b = other.m_values[i];
    if (a.name != b.name || !(a.type == b.type) || a.producer != b.producer ||
        a.outputIndex != b.outputIndex || a.inputIndex != b.inputIndex ||
        a.isConstant() != b.isConstant())
      return false;
    if (a.isConstant() &&
        std::memcmp(a.constant->raw(), b.constant->raw(), a.constant->nbytes()) != 0)
      return false;
  }
  for (size_t i = 0; i < m_nodes.size(); ++i) {
    const Node& a = m_nodes[i];
    const Node& b = other.m_nodes[i];
    if (a.op != b.op || a.inputs != b.inputs || a.outputs != b.outputs || !(a.attrs == b.attrs) ||
        a.group != b.group || a.regions.size() != b.regions.size())
      return false;
    for (size_t r = 0; r < a.regions.size(); ++r)
      if (a.regions[r] != b.regions[r] && !(*a.regions[r] == *b.regions[r])) return false;
  }
  return m_groups == other.m_groups;
}

int64_t indexBound(const Graph& graph, ValueId v) {
  static const std::set<std::string, std::less<>> rearranging{"reshape", "transpose", "strided_slice",
                                                              "broadcast_to"};
  int64_t bound = 0;
  std::vector<ValueId> pending{v};
  std::set<ValueId> seen{v};
  while (!pending.empty()) {
    ValueId cur = pending.back();
    pending.pop_back();
    for (const Node& node : graph.nodes()) {
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (node.inputs[i] != cur) continue;
        if (node.op == "take" && i == 1) {
          const TensorType& table = graph.type(node.inputs[0]);
          int64_t axis = node.attrs.getInt("axis", 0);
          if (axis < 0) axis += table.rank();
          int64_t rows = table.shape[static_cast<size_t>(axis)];
          bound = bound == 0 ? rows : std::min(bound, rows);
        } else if (rearranging.count(node.op) && i == 0 && seen.insert(node.outputs[0]).second) {
          pending.push_back(node.outputs[0]);
        }
      }
    }
  }
  return bound;
}

}  // namespace kiln::core

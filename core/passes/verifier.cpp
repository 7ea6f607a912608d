#include "core/passes/verifier.h"

#include <set>

#include "core/ir/op_registry.h"
#include "runtime/error.h"

namespace kiln::core::passes {
namespace {

class Verifier {
 public:
  explicit Verifier(const Graph& graph) : m_graph(graph) {}

  std::vector<std::string> run() {
    checkValues();
    checkNodes();
    checkOutputs();
    checkGroups();
    return std::move(m_problems);
  }

 private:
  void problem(std::string text) { m_problems.push_back(std::move(text)); }

  std::string nodeName(NodeId n) const {
    const Node& node = m_graph.node(n);
    std::string label = "node " + std::to_string(n);
    if (!node.outputs.empty() && node.outputs[0] >= 0 && node.outputs[0] < numValues())
      label += " (%" + m_graph.value(node.outputs[0]).name + " = " + node.op + ")";
    return label;
  }
  ValueId numValues() const { return static_cast<ValueId>(m_graph.values().size()); }

  void checkValues() {
    std::set<std::string> names;
    for (ValueId id = 0; id < numValues(); ++id) {
      const Value& v = m_graph.value(id);
      if (!names.insert(v.name).second) problem("value name %" + v.name + " is used twice");
      int kinds = (v.producer >= 0) + (v.inputIndex >= 0) + v.isConstant();
      if (kinds != 1) problem("%" + v.name + " must be exactly one of node output, graph input or constant");
      if (v.isConstant() && !(TensorType{v.constant->dtype(), v.constant->shape()} == v.type))
        problem("constant %" + v.name + " holds " +
                TensorType{v.constant->dtype(), v.constant->shape()}.str() + " but is typed " + v.type.str());
      if (v.producer >= 0) {
        if (v.producer >= static_cast<NodeId>(m_graph.nodes().size())) {
          problem("%" + v.name + " names a missing producer");
          continue;
        }
        const Node& p = m_graph.node(v.producer);
        if (v.outputIndex < 0 || v.outputIndex >= static_cast<int>(p.outputs.size()) ||
            p.outputs[v.outputIndex] != id)
          problem("%" + v.name + " is not output " + std::to_string(v.outputIndex) + " of its producer");
      }
      if (v.inputIndex >= 0 &&
          (v.inputIndex >= static_cast<int>(m_graph.inputs().size()) || m_graph.inputs()[v.inputIndex] != id))
        problem("%" + v.name + " is not graph input " + std::to_string(v.inputIndex));
    }
  }

  void checkNodes() {
    std::vector<bool> defined(m_graph.values().size(), false);
    for (ValueId id = 0; id < numValues(); ++id) defined[id] = m_graph.value(id).producer < 0;
    for (NodeId n = 0; n < static_cast<NodeId>(m_graph.nodes().size()); ++n) {
      const Node& node = m_graph.node(n);
      std::vector<TensorType> inTypes;
      bool inputsOk = true;
      for (ValueId v : node.inputs) {
        if (v < 0 || v >= numValues()) {
          problem(nodeName(n) + ": input is not a graph value");
          inputsOk = false;
          continue;
        }
        if (!defined[v]) {
          problem(nodeName(n) + ": input %" + m_graph.value(v).name +
                  " is defined later (not in topological order)");
          inputsOk = false;
        }
        inTypes.push_back(m_graph.type(v));
      }
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        ValueId out = node.outputs[i];
        if (out < 0 || out >= numValues() || m_graph.value(out).producer != n) {
          problem(nodeName(n) + ": output " + std::to_string(i) + " does not name this node as its producer");
          inputsOk = false;
        } else {
          defined[out] = true;
        }
      }
      if (inputsOk) checkTypes(n, inTypes);
    }
  }

  void checkTypes(NodeId n, const std::vector<TensorType>& inTypes) {
    const Node& node = m_graph.node(n);
    const OpDef* def = findOp(node.op);
    if (!def) {
      problem(nodeName(n) + ": unknown operator '" + node.op + "'");
      return;
    }
    std::vector<TensorType> inferred;
    try {
      inferred = inferTypes(*def, inTypes, node.attrs, node.regions);
    } catch (const Error& e) {
      problem(nodeName(n) + ": type inference fails: " + e.what());
      return;
    }
    for (size_t r = 0; r < node.regions.size(); ++r)
      if (node.regions[r])
        for (const std::string& p : Verifier(*node.regions[r]).run())
          problem(nodeName(n) + ", region " + std::to_string(r) + ": " + p);
    if (inferred.size() != node.outputs.size()) {
      problem(nodeName(n) + ": infers " + std::to_string(inferred.size()) + " outputs, has " +
              std::to_string(node.outputs.size()));
      return;
    }
    for (size_t i = 0; i < inferred.size(); ++i) {
      const TensorType& recorded = m_graph.type(node.outputs[i]);
      if (!(inferred[i] == recorded))
        problem(nodeName(n) + ": output " + std::to_string(i) + " is typed " + recorded.str() +
                " but infers " + inferred[i].str());
    }
  }

  void checkOutputs() {
    for (ValueId v : m_graph.outputs()) {
      if (v < 0 || v >= numValues()) problem("a graph output is not a graph value");
    }
  }

  void checkGroups() {
    const auto& groups = m_graph.groups();
    std::set<std::string> names;
    auto numNodes = static_cast<NodeId>(m_graph.nodes().size());
    for (size_t g = 0; g < groups.size(); ++g) {
      const FusedGroup& group = groups[g];
      if (!names.insert(group.name).second) problem("group @" + group.name + " is defined twice");
      if (group.first < 0 || group.first >= group.end || group.end > numNodes) {
        problem("group @" + group.name + " has an empty or out-of-range node range");
        continue;
      }
      for (NodeId n = group.first; n < group.end; ++n) {
        if (m_graph.node(n).group != static_cast<int>(g))
          problem(nodeName(n) + " lies in group @" + group.name + "'s range but is not marked as its member");
      }
    }
    std::vector<bool> isOutput(m_graph.values().size(), false);
    for (ValueId v : m_graph.outputs())
      if (v >= 0 && v < numValues()) isOutput[v] = true;
    for (NodeId n = 0; n < numNodes; ++n) {
      const Node& node = m_graph.node(n);
      if (node.group < 0) continue;
      if (node.group >= static_cast<int>(groups.size())) {
        problem(nodeName(n) + " names a missing group");
        continue;
      }
      const FusedGroup& group = groups[node.group];
      if (n < group.first || n >= group.end)
        problem(nodeName(n) + " is marked as a member of @" + group.name + " outside its range");
      if (n == group.root()) continue;
      for (ValueId out : node.outputs) {
        if (out >= 0 && out < numValues() && isOutput[out])
          problem(nodeName(n) + " is not the root of @" + group.name + " but its output is a graph output");
      }
    }
    // Uses of non-root members from outside their group.
    for (NodeId n = 0; n < numNodes; ++n) {
      const Node& user = m_graph.node(n);
      for (ValueId v : user.inputs) {
        if (v < 0 || v >= numValues()) continue;
        NodeId p = m_graph.value(v).producer;
        if (p < 0) continue;
        int g = m_graph.node(p).group;
        if (g < 0 || g >= static_cast<int>(groups.size()) || p == groups[g].root() || user.group == g)
          continue;
        problem(nodeName(n) + " uses %" + m_graph.value(v).name + ", an intermediate of group @" +
                groups[g].name);
      }
    }
  }

  const Graph& m_graph;
  std::vector<std::string> m_problems;
};

}  // namespace

std::vector<std::string> verifyGraph(const Graph& graph) { return Verifier(graph).run(); }

void verifyGraphOrThrow(const Graph& graph, const std::string& context) {
  std::vector<std::string> problems = verifyGraph(graph);
  if (problems.empty()) return;
  std::string message = context + ": the graph is invalid:";
  for (const std::string& p : problems) message += "\n  " + p;
  throw InternalError(message);
}

}  // namespace kiln::core::passes

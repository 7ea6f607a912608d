// Kiln's graph IR: a typed dataflow graph of tensor operators.
//
// Semantics
// - Every value is a dense tensor with a dtype and a fully static shape (TensorType). Scalars are
//   rank-0 tensors. There is no aliasing: each node writes fresh outputs.
// - Nodes are kept in topological order (a node's inputs are graph inputs, constants, or outputs
//   of earlier nodes). Graph::addNode enforces this and infers output types through the operator
//   registry (core/ir/op_registry.h), so a Graph is always well-typed.
// - Constants are bound tensors owned by the graph (weights, folded values).
// - Attributes are a sorted name → value map; integers also encode booleans.
// - Op names are Kiln's own canonical operators ("conv2d", "add", ...), not aten:: names; the
//   registry lists them with their attributes.
// - Control flow: an `if` or `loop` node carries sub-graphs (regions), each a Graph of its own
//   with its own value names. A region reads only its inputs: the values of the enclosing graph
//   it uses are passed to the node as operands and bound to the region's inputs in order.
//     if(cond, x...)              regions (then, else): inputs the types of x..., outputs of equal
//                                 types in both; cond is one element of any dtype (nonzero: then)
//     loop(trip, cond, v..., x...) {carried=N}  region (body): inputs (i i64[], v..., x...),
//                                 outputs (cond, v'...) with v' of v's types; runs while i < trip
//                                 and cond is nonzero, and returns the last v (TorchScript's
//                                 prim::Loop with static shapes)
//   Regions are immutable once built and shared between copies of the node.
// - Fused groups (from the fuse-ops pass, core/passes/fuse_ops.h) annotate runs of consecutive
//   nodes that lower to one kernel, a "fused primitive function". Only the group's last node (its
//   root) may have outputs used outside the group or returned; the others feed the group only.
//   Groups do not change what the graph computes; a graph without groups lowers node by node.
//
// Text form (see printer.h / parser.h): deterministic, parses back to an equal graph.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "runtime/tensor.h"

namespace kiln::core {

using runtime::DType;
using runtime::Shape;

struct TensorType {
  DType dtype = DType::Float32;
  Shape shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const { return runtime::numElements(shape); }
  bool operator==(const TensorType&) const = default;
  /// "f32[1,3,224,224]"
  std::string str() const;
};

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const std::string, AttrValue>> init) : m_values(init) {}

  bool has(const std::string& name) const { return m_values.count(name) != 0; }
  void set(const std::string& name, AttrValue value) { m_values[name] = std::move(value); }
  /// Typed getters throw kiln::InternalError when the attribute is missing or of another type.
  int64_t getInt(const std::string& name) const;
  int64_t getInt(const std::string& name, int64_t fallback) const;
  double getFloat(const std::string& name) const;  // accepts an integer value too
  double getFloat(const std::string& name, double fallback) const;
  const std::string& getString(const std::string& name) const;
  const std::vector<int64_t>& getInts(const std::string& name) const;
  /// An int-or-pair attribute (stride, padding, kernel, ...) as two values: absent gives
  /// {fallback, fallback}, one value is repeated; more than two throw an InvalidModel error.
  std::vector<int64_t> getPair(const std::string& name, int64_t fallback) const;
  const std::map<std::string, AttrValue>& values() const { return m_values; }
  bool operator==(const Attrs&) const = default;

 private:
  std::map<std::string, AttrValue> m_values;
};

using ValueId = int32_t;
using NodeId = int32_t;

class Graph;
/// A sub-graph of an `if` or `loop` node (see above).
using Region = std::shared_ptr<const Graph>;

struct Value {
  std::string name;          // unique within the graph, printed as %name
  TensorType type;
  NodeId producer = -1;      // -1: graph input or constant
  int outputIndex = 0;       // which output of the producer
  int inputIndex = -1;       // >= 0: the graph's input at that position
  std::optional<runtime::Tensor> constant;  // set for bound constants
  bool isConstant() const { return constant.has_value(); }
};

struct Node {
  std::string op;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  Attrs attrs;
  std::string location;  // source location, e.g. "model.py:42" (may be empty)
  int group = -1;        // index into Graph::groups(), -1 when not fused
  std::vector<Region> regions;  // if: then, else; loop: body; empty for every other op
};

/// A fused primitive function: nodes [first, end) of the graph, lowered as one kernel.
struct FusedGroup {
  std::string name;  // "fused_conv2d_add_relu_3", unique within the graph
  NodeId first = 0;
  NodeId end = 0;    // one past the root (the last node)
  NodeId root() const { return end - 1; }
  int size() const { return end - first; }
  bool operator==(const FusedGroup&) const = default;
};

class Graph {
 public:
  ValueId addInput(const std::string& name, TensorType type);
  ValueId addConstant(const std::string& name, runtime::Tensor data);
  /// Adds a node, checking its inputs and inferring output types via the operator registry.
  /// Throws kiln::Error (Unsupported) for an unknown op and (InvalidModel) for type errors,
  /// mentioning `location` when given.
  /// `regions`: the sub-graphs of an if/loop node (see above).
  std::vector<ValueId> addNode(const std::string& op, std::vector<ValueId> inputs, Attrs attrs = {},
                               const std::string& location = {}, const std::string& outputName = {},
                               std::vector<Region> regions = {});
  /// Single-output convenience.
  ValueId add(const std::string& op, std::vector<ValueId> inputs, Attrs attrs = {},
              const std::string& location = {});
  void setOutputs(std::vector<ValueId> outputs);
  /// Replaces the sub-graphs of if/loop node `node` (with optimized ones, say). InternalError
  /// unless they infer the node's recorded output types.
  void setRegions(NodeId node, std::vector<Region> regions);
  /// Marks nodes [first, end) as one fused group and returns its index. Throws InternalError
  /// when the range is empty or out of range, a node is already grouped, or the name is taken.
  /// (That only the root's outputs escape is checked by the verifier, core/passes/verifier.h.)
  int addGroup(const std::string& name, NodeId first, NodeId end);

  const Value& value(ValueId id) const { return m_values.at(id); }
  const Node& node(NodeId id) const { return m_nodes.at(id); }
  const std::vector<Value>& values() const { return m_values; }
  const std::vector<Node>& nodes() const { return m_nodes; }
  const std::vector<ValueId>& inputs() const { return m_inputs; }
  const std::vector<ValueId>& outputs() const { return m_outputs; }
  const std::vector<FusedGroup>& groups() const { return m_groups; }
  const TensorType& type(ValueId id) const { return m_values.at(id).type; }

  /// A fresh value name with the given stem ("x" → "x", "x_1", ...).
  std::string uniqueName(const std::string& stem);

  /// Structural equality: same inputs, nodes, attributes, types, outputs, constant data, and
  /// regions equal in turn.
  bool operator==(const Graph& other) const;

 private:
  ValueId newValue(const std::string& name, TensorType type);

  std::vector<Value> m_values;
  std::vector<Node> m_nodes;
  std::vector<ValueId> m_inputs;
  std::vector<ValueId> m_outputs;
  std::vector<FusedGroup> m_groups;
  std::set<std::string> m_usedNames;
  std::map<std::string, int> m_nextSuffix;
};

/// The number of rows of the smallest table that integer value `v` indexes (as take's indices,
/// directly or through reshapes, transposes, slices and broadcasts of it), or 0 when it indexes
/// none: the range random test inputs for `v` should keep to.
int64_t indexBound(const Graph& graph, ValueId v);

}  // namespace kiln::core

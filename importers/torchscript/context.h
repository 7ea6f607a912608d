// Private to importers/torchscript: the state of one TorchScript → Kiln import, shared by the
// graph walker (importer.cpp) and the per-operator mapping table (aten_ops.cpp).
//
// Every TorchScript value the walker has seen is bound to an Item:
// - Tensor:   a Kiln graph value (a graph input or a node result);
// - Constant: a compile-time IValue — None, numbers, strings, devices, int/float lists, and
//             constant tensors (weights; materialized as Kiln constants on first use);
// - List / Tuple: a sequence holding at least one graph tensor (a list of only constants is a
//             Constant).
// Integer, list and shape arithmetic is evaluated at import time on Constants, so the mapped
// operators only ever see static attributes.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ir/graph.h"
#include "runtime/error.h"

namespace kiln::importers::ts {

namespace jit = torch::jit;
using core::ValueId;

struct Item {
  enum class Kind { Tensor, Constant, List, Tuple };
  Kind kind = Kind::Constant;
  ValueId tensor = -1;         // Kind::Tensor
  c10::IValue constant;        // Kind::Constant
  std::vector<Item> elements;  // Kind::List / Kind::Tuple

  static Item ofTensor(ValueId id);
  static Item ofConstant(c10::IValue value);
  static Item ofSequence(std::vector<Item> elements, bool tuple);
  bool isConstant() const { return kind == Kind::Constant; }
  bool isTensor() const { return kind == Kind::Tensor; }
};

runtime::DType toKilnDType(c10::ScalarType type);  // throws Unsupported for other dtypes
c10::ScalarType toTorchDType(runtime::DType type);
runtime::Tensor toKilnTensor(const at::Tensor& tensor);
/// False when a strided tensor's sizes, strides and offset reach past its storage (or its storage
/// has no data): libtorch's loader does not check them against the storage record of a corrupt
/// archive, and reading such a weight reads out of bounds.
bool storageCovers(const at::Tensor& tensor);

class ImportContext {
 public:
  explicit ImportContext(core::Graph& graph) : m_graph(graph) {}
  core::Graph& graph() { return m_graph; }

  // --- bookkeeping ---------------------------------------------------------------------------
  void bind(const jit::Value* value, Item item);
  bool isBound(const jit::Value* value) const { return m_items.count(value) != 0; }
  const Item& item(const jit::Value* value) const;
  const Item& input(const jit::Node* node, size_t i) const { return item(node->input(i)); }

  // --- typed reads of a node's inputs --------------------------------------------------------
  // Each throws kiln::Error (Unsupported) naming the node and argument when the input is not
  // of the expected kind (e.g. an integer that depends on tensor data).
  bool isNone(const jit::Node* node, size_t i) const;
  bool isGraphTensor(const jit::Node* node, size_t i) const { return input(node, i).isTensor(); }
  /// A graph tensor, or a constant tensor materialized as a Kiln constant.
  ValueId tensor(const jit::Node* node, size_t i);
  /// A tensor list (prim::ListConstruct of tensors, or a constant list).
  std::vector<ValueId> tensors(const jit::Node* node, size_t i);
  int64_t toInt(const jit::Node* node, size_t i) const;
  double toDouble(const jit::Node* node, size_t i) const;  // accepts int and bool too
  bool toBool(const jit::Node* node, size_t i) const;
  std::string toString(const jit::Node* node, size_t i) const;
  /// An int list; a single int is repeated `repeat` times (for kernel_size=3 style arguments).
  std::vector<int64_t> toInts(const jit::Node* node, size_t i, size_t repeat = 0) const;
  /// A number: a constant int/float/bool or a one-element constant tensor; nullopt otherwise.
  std::optional<double> scalar(const jit::Node* node, size_t i) const;
  /// The constant tensor bound to input i, or nullptr.
  const at::Tensor* constantTensor(const jit::Node* node, size_t i) const;
  /// Name of argument i from the node's schema (for messages), or "#i".
  std::string argName(const jit::Node* node, size_t i) const;

  // --- building ------------------------------------------------------------------------------
  /// A Kiln constant for a torch tensor (contiguous copy; cached per tensor).
  ValueId constant(const at::Tensor& tensor, const std::string& stem = "const");
  /// A rank-0 constant (one per value and dtype).
  ValueId scalarConstant(double value, runtime::DType dtype);
  /// Adds a Kiln node for `node` (its location; named after its first output unless `stem` is
  /// given); rethrows shape errors with the aten:: kind in front.
  ValueId emit(const jit::Node* node, const std::string& op, std::vector<ValueId> inputs,
               core::Attrs attrs = {}, const std::string& stem = {});
  /// Like emit, for operators with several outputs (topk): every output value, in order.
  std::vector<ValueId> emitAll(const jit::Node* node, const std::string& op, std::vector<ValueId> inputs,
                               core::Attrs attrs = {}, const std::string& stem = {});
  /// Binds output `i` of `node` to a graph tensor.
  void setOutput(const jit::Node* node, ValueId id, size_t i = 0) { bind(node->output(i), Item::ofTensor(id)); }
  /// By value: graph references do not survive adding values.
  core::TensorType type(ValueId id) const { return m_graph.type(id); }

  // --- diagnostics ---------------------------------------------------------------------------
  /// "export_models.py:283", or "" when the node has no file location.
  static std::string location(const jit::Node* node);
  /// "aten::foo: why (file.py:12)" — one line, operator first.
  [[noreturn]] static void fail(const jit::Node* node, const std::string& why,
                                ErrorKind kind = ErrorKind::Unsupported);
  /// "aten::foo is not supported[: hint] (file.py:12)".
  [[noreturn]] static void notSupported(const jit::Node* node, const std::string& hint = {});

 private:
  core::Graph& m_graph;
  std::unordered_map<const jit::Value*, Item> m_items;
  std::unordered_map<const c10::TensorImpl*, ValueId> m_constants;
  std::map<std::pair<runtime::DType, double>, ValueId> m_scalars;
  // Keeps cached tensors alive so their TensorImpl addresses are not reused.
  std::vector<at::Tensor> m_keepAlive;
};

/// Maps one aten:: node onto Kiln operators (binding its outputs).
using OpHandler = std::function<void(ImportContext&, const jit::Node*)>;
/// The handler for a qualified kind ("aten::relu"), or nullptr.
const OpHandler* findOpHandler(const std::string& kind);
/// Every kind with a handler, sorted.
std::vector<std::string> handledKinds();

}  // namespace kiln::importers::ts

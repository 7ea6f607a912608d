// TorchScript import: freezing with libtorch, input specs, and the graph walker that binds every
// TorchScript value to a Kiln value or an import-time constant (context.h). Reading an archive and
// checking it before libtorch sees it is archive.cpp; the per-operator mappings live in aten_ops.cpp.
#include "importers/torchscript.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/lower_tuples.h>
#include <torch/csrc/jit/passes/remove_mutation.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

#include "importers/torchscript/archive.h"
#include "importers/torchscript/context.h"
#include "importers/torchscript/view_writes.h"

namespace kiln::importers {
namespace {

using ts::ImportContext;
using ts::Item;
using core::ValueId;
namespace jit = torch::jit;

constexpr const char* kSpecFile = "kiln.json";
constexpr const char* kControlFlowHint =
    "a condition Kiln cannot compute (trace the model with torch.jit.trace instead)";
/// Appended to the error of an if/loop node that cannot be built (its shapes depend on the data).
constexpr const char* kShapeHint =
    "; control flow whose shapes depend on the data cannot be compiled (trace the model with torch.jit.trace "
    "instead)";

using ts::firstLine;
using ts::requireFile;
using ts::torchMessage;

// --- input specs -----------------------------------------------------------------------------

runtime::DType parseSpecDType(const std::string& name, const std::string& where) {
  static const std::map<std::string, runtime::DType> kNames = {
      {"float32", runtime::DType::Float32}, {"float", runtime::DType::Float32},
      {"float64", runtime::DType::Float64}, {"double", runtime::DType::Float64},
      {"int64", runtime::DType::Int64},     {"long", runtime::DType::Int64},
      {"int32", runtime::DType::Int32},     {"int", runtime::DType::Int32},
      {"bool", runtime::DType::Bool},       {"int8", runtime::DType::Int8},
      {"uint8", runtime::DType::UInt8}};
  auto it = kNames.find(name);
  if (it != kNames.end()) return it->second;
  if (auto short_ = runtime::parseDType(name)) return *short_;
  throw Error(where + ": unknown input dtype '" + name + "'", ErrorKind::InvalidModel);
}

std::vector<InputSpec> parseSpecs(const std::string& text, const std::string& where, std::string* source) {
  try {
    nlohmann::json doc = nlohmann::json::parse(text);
    std::vector<InputSpec> specs;
    for (const auto& entry : doc.at("inputs")) {
      InputSpec spec;
      spec.name = entry.value("name", std::string());
      spec.dtype = parseSpecDType(entry.value("dtype", std::string("float32")), where);
      for (const auto& d : entry.at("shape")) spec.shape.push_back(d.get<int64_t>());
      specs.push_back(std::move(spec));
    }
    if (source && doc.contains("source")) {
      const auto& s = doc["source"];
      *source = s.is_string() ? s.get<std::string>() : s.dump();
    }
    return specs;
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": malformed " + kSpecFile + ": " + firstLine(e.what()), ErrorKind::InvalidModel);
  }
}

std::string specString(const InputSpec& spec) {
  return spec.name + ":" + std::string(runtime::dtypeName(spec.dtype)) + runtime::shapeString(spec.shape);
}

/// eval → freeze (no numeric optimizations: no conv-bn folding) → inline → structural cleanups.
/// `module` becomes the frozen module.
std::shared_ptr<jit::Graph> prepareGraph(jit::Module& module, const std::string& path) {
  try {
    module.eval();
    module = jit::freeze_module(module);
    std::shared_ptr<jit::Graph> graph = module.get_method("forward").graph()->copy();
    jit::Inline(*graph);
    jit::LowerSimpleTuples(graph);
    jit::ConstantPropagationImmutableTypes(graph);
    // In-place ops whose mutation no alias can observe become functional; the rest are checked
    // by the walker.
    jit::RemoveTensorMutation(graph);
    jit::EliminateDeadCode(graph);
    return graph;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(path + ": cannot freeze the module: " + torchMessage(e), ErrorKind::InvalidModel);
  }
}

bool containsTensor(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return true;
  for (const c10::TypePtr& t : type->containedTypes()) {
    if (containsTensor(t)) return true;
  }
  return false;
}

// --- the walker ------------------------------------------------------------------------------

/// The import doctor's bookkeeping (surveyTorchScript): every node's outcome, and the values of a
/// libtorch run of the model ("shadow" values) that stand in for outputs Kiln could not compute.
struct SurveyState {
  std::vector<SurveyedOp> ops;
  std::unordered_map<const jit::Value*, c10::IValue> shadow;
  bool stopped = false;
  std::vector<NodeSupport> nodes;  // every node's outcome (classifyTorchScriptGraph)
};

class Walker {
 public:
  Walker(ImportContext& ctx, std::shared_ptr<jit::Graph> graph, SurveyState* survey = nullptr)
      : m_ctx(ctx), m_graph(std::move(graph)), m_survey(survey) {}

  void walk(const jit::Block* block) {
    for (const jit::Node* node : block->nodes()) visit(node);
  }

 private:
  enum class Outcome { Structural, Folded, Mapped };
  void visit(const jit::Node* node);
  Outcome visitNode(const jit::Node* node);
  void surveyNode(const jit::Node* node);
  bool bindStandIns(const jit::Node* node);
  bool visitSequence(const jit::Node* node);
  bool visitShapeQuery(const jit::Node* node);
  bool visitControl(const jit::Node* node);
  void visitIf(const jit::Node* node);
  void visitLoop(const jit::Node* node);
  void emitControl(const jit::Node* node, const std::string& op, const std::vector<ValueId>& inputs, core::Attrs attrs,
                   std::vector<core::Region> regions);
  bool unrollLoop(const jit::Node* node);
  core::Region importRegion(const jit::Block* block, const std::vector<const jit::Value*>& captured,
                            const std::vector<core::TensorType>& firstTypes, std::vector<ValueId>& operands);
  bool tryFold(const jit::Node* node);
  bool visitViewWrite(const jit::Node* node);
  void visitOp(const jit::Node* node);
  void mapNode(const jit::Node* node);
  void checkInPlace(const jit::Node* node);
  std::string kindName(const jit::Node* node) const { return node->kind().toQualString(); }

  ImportContext& m_ctx;
  std::shared_ptr<jit::Graph> m_graph;
  std::unique_ptr<jit::AliasDb> m_aliasDb;
  SurveyState* m_survey = nullptr;
  bool m_inRegion = false;  // walking a sub-graph of an if/loop: survey node ids would not name top-level nodes
};

/// The values a block (and the blocks inside it) reads but does not define, in order of first use.
void collectCaptured(const jit::Block* block, std::set<const jit::Value*> defined,
                     std::vector<const jit::Value*>& captured, std::set<const jit::Value*>& seen) {
  for (const jit::Value* v : block->inputs()) defined.insert(v);
  auto use = [&](const jit::Value* v) {
    if (!defined.count(v) && seen.insert(v).second) captured.push_back(v);
  };
  for (const jit::Node* n : block->nodes()) {
    for (const jit::Value* v : n->inputs()) use(v);
    for (const jit::Block* b : n->blocks()) collectCaptured(b, defined, captured, seen);
    for (const jit::Value* v : n->outputs()) defined.insert(v);
  }
  for (const jit::Value* v : block->outputs()) use(v);
}

/// `item` of the enclosing graph as seen inside a region: its graph tensors become region inputs
/// (each once; `operands` collects the enclosing values passed in), constants stay constants.
Item captureItem(const Item& item, core::Graph& region, const core::Graph& outer, std::vector<ValueId>& operands,
                 std::map<ValueId, ValueId>& inputOf) {
  switch (item.kind) {
    case Item::Kind::Tensor: {
      auto it = inputOf.find(item.tensor);
      if (it != inputOf.end()) return Item::ofTensor(it->second);
      ValueId in = region.addInput(outer.value(item.tensor).name, outer.type(item.tensor));
      operands.push_back(item.tensor);
      inputOf.emplace(item.tensor, in);
      return Item::ofTensor(in);
    }
    case Item::Kind::List:
    case Item::Kind::Tuple: {
      std::vector<Item> elements;
      for (const Item& e : item.elements) elements.push_back(captureItem(e, region, outer, operands, inputOf));
      return Item::ofSequence(std::move(elements), item.kind == Item::Kind::Tuple);
    }
    case Item::Kind::Constant: break;
  }
  return item;
}

/// A region output: a graph tensor, or a constant (tensor or number) materialized in the region.
ValueId regionTensor(ImportContext& ctx, const Item& item, const jit::Node* node) {
  if (item.isTensor()) return item.tensor;
  if (item.isConstant()) {
    const c10::IValue& v = item.constant;
    if (v.isTensor()) return ctx.constant(v.toTensor(), "branch_const");
    if (v.isBool()) return ctx.scalarConstant(v.toBool() ? 1 : 0, runtime::DType::Bool);
    if (v.isInt()) return ctx.constant(at::scalar_tensor(c10::Scalar(v.toInt()), at::kLong), "int_const");  // exact
    if (v.isDouble()) return ctx.scalarConstant(v.toDouble(), runtime::DType::Float32);
  }
  ImportContext::fail(node, "a value passed out of a branch or loop body must be a tensor or a number");
}

constexpr int64_t kMaxUnroll = 64;

void Walker::visit(const jit::Node* node) {
  if (m_survey) return surveyNode(node);
  visitNode(node);
}

Walker::Outcome Walker::visitNode(const jit::Node* node) {
  if (node->kind() == c10::prim::Constant) {
    auto value = jit::toIValue(node->output());
    if (!value) ImportContext::notSupported(node, "constant of type " + node->output()->type()->repr_str());
    // Weights are read (sliced, copied) from here on: a corrupt archive's must fit their storage.
    if (value->isTensor() && !ts::storageCovers(value->toTensor()))
      ImportContext::fail(node, "the constant tensor reaches past its storage (corrupt archive)",
                          ErrorKind::InvalidModel);
    m_ctx.bind(node->output(), Item::ofConstant(*value));
    return Outcome::Structural;
  }
  if (visitShapeQuery(node)) return Outcome::Folded;
  if (visitSequence(node)) return Outcome::Structural;
  if (node->kind() == c10::prim::If) {
    bool computed = m_ctx.input(node, 0).isTensor();
    visitControl(node);
    return computed ? Outcome::Mapped : Outcome::Folded;
  }
  if (node->kind() == c10::prim::Loop) {
    if (unrollLoop(node)) return Outcome::Folded;
    visitLoop(node);
    return Outcome::Mapped;
  }
  if (visitControl(node)) return Outcome::Structural;
  if (tryFold(node)) return Outcome::Folded;
  if (visitViewWrite(node)) return Outcome::Mapped;
  visitOp(node);
  return Outcome::Mapped;
}

/// Survey mode: records the node's outcome; an unsupported node is recorded with its message and
/// its outputs are bound to stand-ins (new graph inputs shaped like the libtorch run's values) so
/// the walk goes on. Without a stand-in the walk stops and the rest is listed unverified.
void Walker::surveyNode(const jit::Node* node) {
  const c10::Symbol kind = node->kind();
  bool listed = kind.is_aten() || kind == c10::prim::If || kind == c10::prim::Loop;
  SurveyedOp op{kindName(node), ImportContext::location(node), OpStatus::Supported, {}, {}, 0};
  if (m_survey->stopped) {
    m_survey->nodes.push_back({node, OpStatus::Unsupported, "not checked: the import stopped at an earlier node"});
    if (!listed) return;
    op.status = ts::findOpHandler(op.kind) || kind == c10::prim::If ? OpStatus::Supported : OpStatus::Unsupported;
    op.message = "not checked: the import stopped at an earlier unsupported operator";
    m_survey->ops.push_back(std::move(op));
    return;
  }
  auto before = static_cast<core::NodeId>(m_ctx.graph().nodes().size());
  try {
    Outcome outcome = visitNode(node);
    m_survey->nodes.push_back({node, outcome == Outcome::Mapped ? OpStatus::Supported : OpStatus::Folded, {}});
    if (!listed) return;
    op.status = outcome == Outcome::Mapped ? OpStatus::Supported : OpStatus::Folded;
    for (auto n = before; n < static_cast<core::NodeId>(m_ctx.graph().nodes().size()); ++n) op.nodes.push_back(n);
    // A branch taken at import time lists its nodes itself; nodes inside sub-graphs have no
    // top-level id (their FLOPs are not counted in the share).
    if ((kind == c10::prim::If && outcome != Outcome::Mapped) || m_inRegion) op.nodes.clear();
    m_survey->ops.push_back(std::move(op));
  } catch (const InternalError&) {
    throw;
  } catch (const Error& e) {
    op.status = OpStatus::Unsupported;
    op.message = e.what();
    m_survey->nodes.push_back({node, OpStatus::Unsupported, op.message});
    for (const jit::Value* v : node->outputs()) {
      auto it = m_survey->shadow.find(v);
      if (it != m_survey->shadow.end() && it->second.isTensor()) op.outputElements += it->second.toTensor().numel();
    }
    m_survey->ops.push_back(std::move(op));
    if (!bindStandIns(node)) m_survey->stopped = true;
  }
}

/// Binds every output of `node` to its libtorch value: tensors become new graph inputs of the same
/// type, anything else a constant. False when some output has no usable value.
bool Walker::bindStandIns(const jit::Node* node) {
  auto standIn = [&](const at::Tensor& t, const std::string& stem) -> std::optional<Item> {
    try {
      core::TensorType type{ts::toKilnDType(t.scalar_type()), runtime::Shape(t.sizes().begin(), t.sizes().end())};
      return Item::ofTensor(m_ctx.graph().addInput(m_ctx.graph().uniqueName(stem), type));
    } catch (const Error&) {
      return std::nullopt;
    }
  };
  for (const jit::Value* v : node->outputs()) {
    auto it = m_survey->shadow.find(v);
    if (it == m_survey->shadow.end()) return false;
    const c10::IValue& value = it->second;
    std::string stem = "unsupported_" + (v->hasDebugName() ? v->debugNameBase() : std::string("value"));
    if (value.isTensor()) {
      auto item = standIn(value.toTensor(), stem);
      if (!item) return false;
      m_ctx.bind(v, *item);
    } else if (value.isTensorList()) {
      std::vector<Item> elements;
      for (const at::Tensor& t : value.toTensorVector()) {
        auto item = standIn(t, stem);
        if (!item) return false;
        elements.push_back(*item);
      }
      m_ctx.bind(v, Item::ofSequence(std::move(elements), false));
    } else {
      m_ctx.bind(v, Item::ofConstant(value));
    }
  }
  return true;
}

/// The elements of a list or tuple item, constant or not; nullopt for anything else.
std::optional<std::vector<Item>> elementsOf(const Item& item) {
  if (item.kind == Item::Kind::List || item.kind == Item::Kind::Tuple) return item.elements;
  if (!item.isConstant() || !(item.constant.isList() || item.constant.isTuple())) return std::nullopt;
  std::vector<Item> out;
  if (item.constant.isList()) {
    for (const c10::IValue& e : item.constant.toListRef()) out.push_back(Item::ofConstant(e));
  } else {
    for (const c10::IValue& e : item.constant.toTupleRef().elements()) out.push_back(Item::ofConstant(e));
  }
  return out;
}

bool Walker::visitSequence(const jit::Node* node) {
  const c10::Symbol kind = node->kind();
  if (kind == c10::prim::ListConstruct || kind == c10::prim::TupleConstruct) {
    bool tuple = kind == c10::prim::TupleConstruct;
    std::vector<Item> elements;
    bool constant = true;
    for (const jit::Value* v : node->inputs()) {
      elements.push_back(m_ctx.item(v));
      constant = constant && elements.back().isConstant();
    }
    if (!constant) {
      m_ctx.bind(node->output(), Item::ofSequence(std::move(elements), tuple));
      return true;
    }
    std::vector<c10::IValue> values;
    for (Item& e : elements) values.push_back(std::move(e.constant));
    if (tuple) {
      m_ctx.bind(node->output(), Item::ofConstant(c10::ivalue::Tuple::create(std::move(values))));
      return true;
    }
    c10::impl::GenericList list(node->output()->type()->expectRef<c10::ListType>().getElementType());
    for (c10::IValue& v : values) list.push_back(std::move(v));
    m_ctx.bind(node->output(), Item::ofConstant(std::move(list)));
    return true;
  }
  bool unpack = kind == c10::prim::ListUnpack || kind == c10::prim::TupleUnpack;
  bool index = kind == c10::prim::TupleIndex || kind == c10::aten::__getitem__;
  if (!unpack && !index && kind != c10::aten::len) return false;
  auto elements = elementsOf(m_ctx.input(node, 0));
  if (!elements) return false;  // e.g. indexing a string or a dict: folded by libtorch
  auto n = static_cast<int64_t>(elements->size());
  if (unpack) {
    if (elements->size() != node->outputs().size())
      ImportContext::fail(node, "expected " + std::to_string(node->outputs().size()) + " elements, got " +
                                    std::to_string(n), ErrorKind::InvalidModel);
    for (size_t i = 0; i < node->outputs().size(); ++i) m_ctx.bind(node->output(i), (*elements)[i]);
  } else if (index) {
    int64_t i = m_ctx.toInt(node, 1);
    if (i < -n || i >= n) ImportContext::fail(node, "index out of range", ErrorKind::InvalidModel);
    m_ctx.bind(node->output(), (*elements)[i < 0 ? i + n : i]);
  } else {
    m_ctx.bind(node->output(), Item::ofConstant(n));
  }
  return true;
}

/// Shape queries on tensors computed by the model, answered from their static types.
bool Walker::visitShapeQuery(const jit::Node* node) {
  static const c10::Symbol kNumel = c10::Symbol::fromQualString("aten::numel");
  const c10::Symbol kind = node->kind();
  if (kind != c10::aten::size && kind != c10::aten::dim && kind != kNumel && kind != c10::prim::dtype &&
      kind != c10::prim::device && kind != c10::prim::is_cuda)
    return false;
  if (!m_ctx.isGraphTensor(node, 0)) return false;  // constant tensors are folded by libtorch
  const core::TensorType type = m_ctx.type(m_ctx.input(node, 0).tensor);
  c10::IValue result;
  if (kind == c10::aten::size && node->inputs().size() == 1) {
    result = c10::IValue(c10::List<int64_t>(type.shape));
  } else if (kind == c10::aten::size) {
    int64_t dim = m_ctx.toInt(node, 1), rank = type.rank();
    if (dim < -rank || dim >= rank) ImportContext::fail(node, "dimension out of range", ErrorKind::InvalidModel);
    result = type.shape[dim < 0 ? dim + rank : dim];
  } else if (kind == c10::aten::dim) {
    result = type.rank();
  } else if (kind == kNumel) {
    result = type.numel();
  } else if (kind == c10::prim::dtype) {
    result = static_cast<int64_t>(ts::toTorchDType(type.dtype));
  } else if (kind == c10::prim::device) {
    result = c10::Device(c10::kCPU);
  } else {
    result = false;  // prim::is_cuda
  }
  m_ctx.bind(node->output(), Item::ofConstant(std::move(result)));
  return true;
}

/// Control flow and structural nodes. prim::If on a condition known at import time takes its
/// branch; on a computed condition it becomes an `if` node with both branches as sub-graphs.
/// (prim::Loop: unrollLoop, else visitLoop.)
bool Walker::visitControl(const jit::Node* node) {
  const c10::Symbol kind = node->kind();
  if (kind == c10::prim::If) {
    const Item& cond = m_ctx.input(node, 0);
    if (cond.isTensor()) {
      visitIf(node);
      return true;
    }
    if (!cond.isConstant() || !(cond.constant.isBool() || cond.constant.isInt()))
      ImportContext::notSupported(node, kControlFlowHint);
    const jit::Block* block = node->blocks()[m_ctx.toBool(node, 0) ? 0 : 1];
    walk(block);
    for (size_t i = 0; i < node->outputs().size(); ++i) m_ctx.bind(node->output(i), m_ctx.item(block->outputs()[i]));
    return true;
  }
  if (kind == c10::prim::RaiseException)
    ImportContext::fail(node, "the model raises an exception for these input shapes", ErrorKind::InvalidInput);
  if (kind == c10::aten::warn || kind == c10::prim::Print) return true;
  if (kind == c10::prim::unchecked_cast || kind == c10::aten::detach) {
    m_ctx.bind(node->output(), m_ctx.input(node, 0));
    return true;
  }
  if (kind == c10::prim::GetAttr || kind == c10::prim::SetAttr || kind == c10::prim::CallMethod ||
      kind == c10::prim::CallFunction)
    ImportContext::notSupported(node, "left in the graph after freezing and inlining");
  return false;
}

/// Builds the region of `block`: one input per type of `firstTypes` for the block's first inputs
/// (a loop body's counter and carried values), then one per enclosing graph tensor among
/// `captured` (appended to `operands`, the values the node passes in). Every block output is a
/// region output.
core::Region Walker::importRegion(const jit::Block* block, const std::vector<const jit::Value*>& captured,
                                  const std::vector<core::TensorType>& firstTypes, std::vector<ValueId>& operands) {
  auto region = std::make_shared<core::Graph>();
  ImportContext sub(*region);
  for (size_t i = 0; i < firstTypes.size(); ++i) {
    const jit::Value* in = block->inputs()[i];
    sub.bind(in, Item::ofTensor(region->addInput(in->debugNameBase(), firstTypes[i])));
  }
  std::map<ValueId, ValueId> inputOf;
  for (const jit::Value* v : captured) sub.bind(v, captureItem(m_ctx.item(v), *region, m_ctx.graph(), operands, inputOf));
  Walker walker(sub, m_graph, m_survey);
  walker.m_inRegion = true;
  walker.walk(block);
  std::vector<ValueId> outputs;
  for (const jit::Value* out : block->outputs()) outputs.push_back(regionTensor(sub, sub.item(out), block->owningNode()));
  region->setOutputs(std::move(outputs));
  return region;
}

/// Adds the if/loop node for `node` and binds its outputs; a type error (branches or iterations
/// of different shapes) names `node` with the hint to trace instead.
void Walker::emitControl(const jit::Node* node, const std::string& op, const std::vector<ValueId>& inputs,
                         core::Attrs attrs, std::vector<core::Region> regions) {
  std::vector<ValueId> outs;
  try {
    outs = m_ctx.graph().addNode(op, inputs, std::move(attrs), ImportContext::location(node),
                                 node->outputs().empty() ? op : node->output(0)->debugNameBase(), std::move(regions));
  } catch (const InternalError&) {
    throw;
  } catch (const Error& e) {
    ImportContext::fail(node, e.what() + std::string(kShapeHint));
  }
  for (size_t i = 0; i < outs.size(); ++i) m_ctx.bind(node->output(i), Item::ofTensor(outs[i]));
}

/// prim::If on a computed condition: an `if` node over both branches, which take the same
/// operands (every enclosing tensor either branch reads).
void Walker::visitIf(const jit::Node* node) {
  std::vector<const jit::Value*> captured;
  std::set<const jit::Value*> seen;
  for (const jit::Block* b : node->blocks()) collectCaptured(b, {}, captured, seen);
  std::vector<ValueId> operands;
  std::vector<core::Region> regions;
  for (const jit::Block* b : node->blocks()) {
    std::vector<ValueId> mine;
    regions.push_back(importRegion(b, captured, {}, mine));
    KILN_ASSERT(regions.size() == 1 || mine == operands, "prim::If: the branches' operands differ");
    operands = std::move(mine);
  }
  std::vector<ValueId> inputs{m_ctx.input(node, 0).tensor};
  inputs.insert(inputs.end(), operands.begin(), operands.end());
  emitControl(node, "if", inputs, {}, std::move(regions));
}

/// prim::Loop(trip, cond, v...) with block (i, v...) → (cond, v...): unrolled at import time when
/// the trip count is a constant of at most kMaxUnroll and the condition is constant at every
/// step. Returns false (and binds nothing) otherwise.
bool Walker::unrollLoop(const jit::Node* node) {
  const Item& trip = m_ctx.input(node, 0);
  const Item& cond0 = m_ctx.input(node, 1);
  if (!trip.isConstant() || !trip.constant.isInt() || !cond0.isConstant() || !cond0.constant.isBool()) return false;
  if (trip.constant.toInt() > kMaxUnroll) return false;
  // Dry run: the condition must be constant at every step (the body may compute it from tensors).
  const jit::Block* body = node->blocks()[0];
  const size_t carried = node->outputs().size();
  std::vector<Item> state;
  for (size_t v = 0; v < carried; ++v) state.push_back(m_ctx.input(node, 2 + v));
  core::Graph& graph = m_ctx.graph();
  // The condition may turn out computed after a few steps: check on a scratch graph first (the
  // enclosing tensors the body reads are its inputs), so the real graph only grows when unrolling.
  {
    core::Graph scratch;
    ImportContext probe(scratch);
    std::vector<const jit::Value*> captured;
    std::set<const jit::Value*> seen;
    collectCaptured(body, {}, captured, seen);
    std::vector<ValueId> operands;
    std::map<ValueId, ValueId> inputOf;
    std::vector<Item> probeState;
    for (const Item& it : state) probeState.push_back(captureItem(it, scratch, graph, operands, inputOf));
    for (const jit::Value* v : captured) probe.bind(v, captureItem(m_ctx.item(v), scratch, graph, operands, inputOf));
    bool go = cond0.constant.toBool();
    Walker walker(probe, m_graph, nullptr);
    for (int64_t i = 0; i < trip.constant.toInt() && go; ++i) {
      probe.bind(body->inputs()[0], Item::ofConstant(c10::IValue(i)));
      for (size_t v = 0; v < carried; ++v) probe.bind(body->inputs()[1 + v], probeState[v]);
      try {
        walker.walk(body);
      } catch (const InternalError&) {
        throw;
      } catch (const Error&) {
        return false;  // the loop node reports what fails
      }
      const Item& c = probe.item(body->outputs()[0]);
      if (!c.isConstant() || !c.constant.isBool()) return false;
      go = c.constant.toBool();
      for (size_t v = 0; v < carried; ++v) probeState[v] = probe.item(body->outputs()[1 + v]);
    }
  }
  bool go = cond0.constant.toBool();
  for (int64_t i = 0; i < trip.constant.toInt() && go; ++i) {
    m_ctx.bind(body->inputs()[0], Item::ofConstant(c10::IValue(i)));
    for (size_t v = 0; v < carried; ++v) m_ctx.bind(body->inputs()[1 + v], state[v]);
    walk(body);
    go = m_ctx.item(body->outputs()[0]).constant.toBool();
    for (size_t v = 0; v < carried; ++v) state[v] = m_ctx.item(body->outputs()[1 + v]);
  }
  for (size_t v = 0; v < carried; ++v) m_ctx.bind(node->output(v), state[v]);
  return true;
}

/// prim::Loop with a computed trip count or condition: a `loop` node. Carried numbers become
/// rank-0 tensors; the body's iteration count is an i64 scalar input.
void Walker::visitLoop(const jit::Node* node) {
  const jit::Block* body = node->blocks()[0];
  const size_t carried = node->outputs().size();
  if (carried == 0) ImportContext::fail(node, "a loop that carries no value computes nothing Kiln keeps");
  ValueId trip = regionTensor(m_ctx, m_ctx.input(node, 0), node);
  if (m_ctx.type(trip).dtype != runtime::DType::Int64)
    trip = m_ctx.emit(node, "cast", {trip}, {{"dtype", std::string("i64")}}, "trip");
  ValueId cond = regionTensor(m_ctx, m_ctx.input(node, 1), node);
  std::vector<ValueId> init;
  std::vector<core::TensorType> types{core::TensorType{runtime::DType::Int64, {}}};
  for (size_t v = 0; v < carried; ++v) {
    init.push_back(regionTensor(m_ctx, m_ctx.input(node, 2 + v), node));
    types.push_back(m_ctx.type(init.back()));
  }
  std::vector<const jit::Value*> captured;
  std::set<const jit::Value*> seen;
  collectCaptured(body, {}, captured, seen);
  std::vector<ValueId> operands;
  core::Region region = importRegion(body, captured, types, operands);
  std::vector<ValueId> inputs{trip, cond};
  inputs.insert(inputs.end(), init.begin(), init.end());
  inputs.insert(inputs.end(), operands.begin(), operands.end());
  emitControl(node, "loop", inputs, {{"carried", static_cast<int64_t>(carried)}}, {region});
}

/// Evaluates a node at import time with libtorch when all its inputs are constants: integer and
/// list arithmetic, scalar conversions, shape computations on constant tensors. Numeric tensor
/// work on weights is left to Kiln's passes (only tensors of at most one element are folded).
bool Walker::tryFold(const jit::Node* node) {
  // An aten node without a libtorch schema (an operator newer than libtorch, from a torch.export
  // program) cannot run; hasSideEffects() would assert on it.
  const jit::Operator* op = node->maybeOperator();
  if (!op || op->schema().is_mutable()) return false;
  if (!node->blocks().empty() || node->hasSideEffects() || node->isNondeterministic()) return false;
  bool bigTensorInput = false;
  for (const jit::Value* v : node->inputs()) {
    const Item& it = m_ctx.item(v);
    if (!it.isConstant()) return false;
    if (it.constant.isTensor() && it.constant.toTensor().numel() > 1) bigTensorInput = true;
    if (it.constant.isTensorList()) bigTensorInput = true;
  }
  if (bigTensorInput) {
    for (const jit::Value* v : node->outputs()) {
      if (containsTensor(v->type())) return false;
    }
  }
  jit::Stack stack;
  for (const jit::Value* v : node->inputs()) stack.push_back(m_ctx.item(v).constant);
  try {
    op->getOperation(node)(stack);
  } catch (const std::exception& e) {
    ImportContext::fail(node, torchMessage(e), ErrorKind::InvalidModel);
  }
  KILN_ASSERT(stack.size() == node->outputs().size(), kindName(node) + ": folding produced a wrong number of results");
  for (size_t i = 0; i < stack.size(); ++i) m_ctx.bind(node->output(i), Item::ofConstant(std::move(stack[i])));
  return true;
}

/// An in-place write into a slice/select view of another tensor (view_writes.h).
bool Walker::visitViewWrite(const jit::Node* node) {
  return ts::importViewWrite(m_ctx, node, [&] { mapNode(node); });
}

void Walker::visitOp(const jit::Node* node) {
  mapNode(node);
  checkInPlace(node);
}

/// Runs the operator handler of `node`, keeping the operator first in its errors.
void Walker::mapNode(const jit::Node* node) {
  std::string kind = kindName(node);
  const ts::OpHandler* handler = ts::findOpHandler(kind);
  if (!handler) ImportContext::notSupported(node);
  try {
    (*handler)(m_ctx, node);
  } catch (const InternalError&) {
    throw;
  } catch (const Error& e) {
    if (std::string_view(e.what()).substr(0, kind.size()) == kind) throw;
    ImportContext::fail(node, e.what(), e.kind());  // keep the operator first
  } catch (const std::exception& e) {
    ImportContext::fail(node, torchMessage(e), ErrorKind::InvalidModel);
  }
  for (const jit::Value* out : node->outputs()) {
    KILN_ASSERT(m_ctx.isBound(out), kind + " left an output unbound");
  }
}

/// An in-place op maps onto its functional form. Later uses of the mutated tensor then read the
/// new value; that is only right when nothing else aliases it, and a caller-visible mutation of a
/// graph input cannot be reproduced, so both are rejected.
void Walker::checkInPlace(const jit::Node* node) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema || schema->arguments().empty() || node->inputs().empty() || node->outputs().empty()) return;
  const c10::AliasInfo* alias = schema->arguments()[0].alias_info();
  if (!alias || !alias->isWrite()) return;
  const jit::Value* self = node->input(0);
  const Item& before = m_ctx.item(self);
  const Item& after = m_ctx.item(node->output(0));
  if (before.isTensor() && after.isTensor() && before.tensor == after.tensor) return;  // no-op (dropout_)
  if (self->node()->kind() == c10::prim::Param)
    ImportContext::notSupported(node, "it updates the model input %" + self->debugNameBase() + " in place");
  if (!m_aliasDb) m_aliasDb = std::make_unique<jit::AliasDb>(m_graph, /*isFrozen=*/true);
  const jit::Block* block = node->owningBlock();
  for (const jit::Node* next = node->next();; next = next->next()) {
    for (const jit::Value* v : next->inputs()) {
      if (v == self) continue;
      bool definedBefore = v->node()->kind() == c10::prim::Param || v->node()->isBefore(node);
      if (definedBefore && m_aliasDb->mayAlias(v, self))
        ImportContext::notSupported(node, "the tensor it updates in place is also used through an alias (a view)");
    }
    if (next == block->return_node()) break;
  }
  m_ctx.bind(self, after);
}

// --- inputs and outputs ----------------------------------------------------------------------

std::vector<InputSpec> specsFromTypes(const std::vector<const jit::Value*>& args) {
  std::vector<InputSpec> specs;
  for (const jit::Value* arg : args) {
    auto type = arg->type()->cast<c10::TensorType>();
    if (!type) return {};
    auto sizes = type->sizes().concrete_sizes();
    auto dtype = type->scalarType();
    if (!sizes || !dtype) return {};
    specs.push_back(InputSpec{arg->debugNameBase(), ts::toKilnDType(*dtype), *sizes});
  }
  return specs;
}

void flattenOutputs(ImportContext& ctx, const Item& item, std::vector<ValueId>& out) {
  switch (item.kind) {
    case Item::Kind::Tensor: out.push_back(item.tensor); return;
    case Item::Kind::List:
    case Item::Kind::Tuple:
      for (const Item& e : item.elements) flattenOutputs(ctx, e, out);
      return;
    case Item::Kind::Constant: break;
  }
  const c10::IValue& v = item.constant;
  if (v.isTensor()) {
    out.push_back(ctx.constant(v.toTensor(), "output"));
  } else if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) flattenOutputs(ctx, Item::ofConstant(e), out);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) flattenOutputs(ctx, Item::ofConstant(e), out);
  } else {
    throw Error("the model returns a " + v.tagKind() + "; only tensors (or tuples and lists of tensors) can be outputs",
                ErrorKind::Unsupported);
  }
}

core::Graph buildGraph(const std::shared_ptr<jit::Graph>& tsGraph, const std::vector<const jit::Value*>& args,
                       std::vector<InputSpec>& specs, SurveyState* survey = nullptr) {
  core::Graph graph;
  ImportContext ctx(graph);
  for (size_t i = 0; i < args.size(); ++i) {
    const jit::Value* arg = args[i];
    if (!arg->type()->cast<c10::TensorType>())
      throw Error("forward argument '" + arg->debugNameBase() + "' has type " + arg->type()->repr_str() +
                      "; only tensor arguments are supported",
                  ErrorKind::Unsupported);
    if (specs[i].name.empty()) specs[i].name = arg->debugNameBase();
    ValueId id = graph.addInput(specs[i].name, core::TensorType{specs[i].dtype, specs[i].shape});
    ctx.bind(arg, Item::ofTensor(id));
  }
  Walker walker(ctx, tsGraph, survey);
  walker.walk(tsGraph->block());
  if (survey && survey->stopped) return graph;

  std::vector<ValueId> outputs;
  for (const jit::Value* v : tsGraph->outputs()) flattenOutputs(ctx, ctx.item(v), outputs);
  // Every output is a node result of its own: copy graph inputs, constants and repeats.
  std::set<ValueId> seen;
  for (ValueId& id : outputs) {
    std::string name = graph.value(id).name;
    if (graph.value(id).producer < 0 || !seen.insert(id).second)
      id = graph.addNode("copy", {id}, {}, {}, name + "_copy")[0];
    seen.insert(id);
  }
  graph.setOutputs(std::move(outputs));
  return graph;
}

}  // namespace

std::vector<InputSpec> readInputSpecs(const std::string& path) {
  requireFile(path);
  std::string text;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);  // not all of a large file for one record
    std::string record = std::string("extra/") + kSpecFile;
    if (!reader.hasRecord(record)) return {};
    auto [data, size] = reader.getRecord(record);
    text.assign(static_cast<const char*>(data.get()), size);
  } catch (const std::exception& e) {
    std::string problem = ts::fileKindProblem(path);
    throw Error(path + ": " + (problem.empty() ? torchMessage(e) : problem), ErrorKind::InvalidModel);
  }
  if (text.empty()) return {};
  return parseSpecs(text, path, nullptr);
}

InputSignature readInputSignature(const std::string& path) {
  jit::ExtraFilesMap extra{{kSpecFile, ""}};
  jit::Module module = ts::loadArchive(path, extra);
  InputSignature sig;
  std::vector<const jit::Value*> args;
  try {
    std::shared_ptr<jit::Graph> graph = module.get_method("forward").graph();
    for (const jit::Value* v : graph->inputs()) {
      if (v->type()->kind() == c10::TypeKind::ClassType) continue;  // self
      args.push_back(v);
      sig.names.push_back(v->debugNameBase());
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(path + ": " + torchMessage(e), ErrorKind::InvalidModel);
  }
  if (!extra[kSpecFile].empty()) sig.specs = parseSpecs(extra[kSpecFile], path, nullptr);
  if (sig.specs.empty()) sig.specs = specsFromTypes(args);
  return sig;
}

namespace {

/// A loaded, frozen and prepared module with its forward arguments and input specs.
struct Prepared {
  jit::Module module;
  std::shared_ptr<jit::Graph> graph;
  std::vector<const jit::Value*> args;
  std::vector<InputSpec> specs;
  std::string description;
};

Prepared prepare(const std::string& path, const ImportOptions& options) {
  jit::ExtraFilesMap extra{{kSpecFile, ""}};
  Prepared p{ts::loadArchive(path, extra), nullptr, {}, {}, {}};
  std::vector<InputSpec> fileSpecs;
  if (!extra[kSpecFile].empty()) fileSpecs = parseSpecs(extra[kSpecFile], path, &p.description);

  p.graph = prepareGraph(p.module, path);
  for (const jit::Value* v : p.graph->inputs()) {
    if (v->type()->kind() == c10::TypeKind::ClassType) continue;  // %self, unused once frozen
    p.args.push_back(v);
  }

  p.specs = !options.inputs.empty() ? options.inputs : !fileSpecs.empty() ? fileSpecs : specsFromTypes(p.args);
  if (p.specs.empty() && !p.args.empty())
    throw Error(path + ": input shapes are unknown (the file has no " + std::string(kSpecFile) +
                    " and its graph no complete tensor types); pass the input shapes explicitly",
                ErrorKind::InvalidInput);
  if (p.specs.size() != p.args.size()) {
    std::string names;
    for (const jit::Value* a : p.args) names += (names.empty() ? "" : ", ") + a->debugNameBase();
    throw Error(path + ": the model takes " + std::to_string(p.args.size()) + " input" +
                    (p.args.size() == 1 ? "" : "s") + " (" + names + ") but " + std::to_string(p.specs.size()) +
                    " input spec" + (p.specs.size() == 1 ? " was" : "s were") + " given",
                ErrorKind::InvalidInput);
  }
  for (const InputSpec& spec : p.specs) {
    for (int64_t d : spec.shape) {
      if (d < 0) throw Error(path + ": input " + specString(spec) + " has a negative dimension", ErrorKind::InvalidInput);
    }
  }
  return p;
}

/// Runs the prepared graph once with libtorch on random inputs (ids: zeros) and returns the value
/// of every top-level TorchScript value; empty when libtorch cannot run it. Works on a copy that
/// returns one tuple of every value (functions have a single output); the copy keeps node order.
std::unordered_map<const jit::Value*, c10::IValue> shadowRun(Prepared& p) {
  std::shared_ptr<jit::Graph> copy = p.graph->copy();
  std::vector<const jit::Value*> original;
  for (const jit::Node* n : p.graph->nodes())
    for (const jit::Value* v : n->outputs()) original.push_back(v);
  std::vector<jit::Value*> exposed;
  for (jit::Node* n : copy->nodes())
    for (jit::Value* v : n->outputs()) exposed.push_back(v);
  std::unordered_map<const jit::Value*, c10::IValue> values;
  if (exposed.size() != original.size()) return values;
  jit::Node* tuple = copy->createTuple(exposed);
  copy->appendNode(tuple);
  while (!copy->outputs().empty()) copy->eraseOutput(0);
  copy->registerOutput(tuple->output());
  jit::Stack stack;
  for (const jit::Value* v : copy->inputs()) {
    if (v->type()->kind() == c10::TypeKind::ClassType) stack.emplace_back(p.module._ivalue());
  }
  at::manual_seed(0);
  for (const InputSpec& spec : p.specs) {
    auto opts = at::TensorOptions().dtype(ts::toTorchDType(spec.dtype));
    stack.emplace_back(spec.dtype == runtime::DType::Float32 || spec.dtype == runtime::DType::Float64
                           ? at::randn(spec.shape, opts)
                           : at::zeros(spec.shape, opts));
  }
  try {
    at::NoGradGuard noGrad;
    jit::GraphFunction run("kiln_survey", copy, nullptr);
    run.run(stack);
  } catch (const std::exception&) {
    return values;
  }
  if (stack.size() != 1 || !stack[0].isTuple()) return values;
  const auto& elements = stack[0].toTupleRef().elements();
  if (elements.size() != original.size()) return values;
  for (size_t i = 0; i < original.size(); ++i) values.emplace(original[i], elements[i]);
  return values;
}

bool hasControlFlow(const jit::Block* block) {
  for (const jit::Node* n : block->nodes()) {
    if (n->kind() == c10::prim::If || n->kind() == c10::prim::Loop) return true;
    for (const jit::Block* b : n->blocks()) {
      if (hasControlFlow(b)) return true;
    }
  }
  return false;
}

}  // namespace

ImportedModel importTorchScript(const std::string& path, const ImportOptions& options) {
  Prepared p = prepare(path, options);
  ImportedModel result;
  result.description = p.description;
  try {
    result.graph = buildGraph(p.graph, p.args, p.specs);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(path + ": " + torchMessage(e), ErrorKind::InvalidModel);
  }
  result.inputs = std::move(p.specs);
  return result;
}

namespace {

/// The doctor's walk over a prepared graph; `shadow`: libtorch runs it once so that unsupported
/// nodes' outputs can stand in (without it the walk stops at the first unsupported node).
/// libtorch's errors become InvalidModel, prefixed with `where`.
SurveyResult surveyPrepared(Prepared& p, bool shadow, const std::string& where) {
  SurveyState state;
  if (shadow) state.shadow = shadowRun(p);
  SurveyResult result;
  result.controlFlow = hasControlFlow(p.graph->block());
  try {
    result.graph = buildGraph(p.graph, p.args, p.specs, &state);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(where + torchMessage(e), ErrorKind::InvalidModel);
  }
  result.ops = std::move(state.ops);
  result.complete = !state.stopped;
  result.inputs = std::move(p.specs);
  return result;
}

}  // namespace

SurveyResult surveyTorchScript(const std::string& path, const ImportOptions& options) {
  Prepared p = prepare(path, options);
  return surveyPrepared(p, true, path + ": ");
}

std::vector<std::string> supportedTorchScriptOps() { return ts::handledKinds(); }

bool supportsTorchScriptOp(const std::string& kind) { return ts::findOpHandler(kind) != nullptr; }

// ---- in-memory modules and graphs -------------------------------------------------------------

std::shared_ptr<torch::jit::Graph> prepareTorchScriptModule(const torch::jit::Module& module) {
  if (!module.find_method("forward")) throw Error("the module has no forward method", ErrorKind::InvalidModel);
  jit::Module original = module;  // handles: prepareGraph replaces `frozen` by the frozen clone
  jit::Module frozen = module;
  bool training = original.is_training();
  std::shared_ptr<jit::Graph> graph;
  try {
    graph = prepareGraph(frozen, "module");
  } catch (...) {
    if (training) original.train(true);
    throw;
  }
  if (training) original.train(true);
  for (size_t i = graph->inputs().size(); i-- > 0;) {
    const jit::Value* v = graph->inputs()[i];
    if (v->type()->kind() != c10::TypeKind::ClassType) continue;
    if (v->hasUses())
      throw Error("module: forward still reads attributes of the module after freezing (are they mutated?)",
                  ErrorKind::Unsupported);
    graph->eraseInput(i);
  }
  return graph;
}

namespace {

Prepared preparedGraph(const std::shared_ptr<jit::Graph>& graph, const std::vector<InputSpec>& inputs) {
  Prepared p{jit::Module(), graph, {}, inputs, {}};
  for (const jit::Value* v : graph->inputs()) p.args.push_back(v);
  if (p.specs.size() != p.args.size())
    throw Error("the graph takes " + std::to_string(p.args.size()) + " input(s) but " +
                    std::to_string(p.specs.size()) + " input spec(s) were given",
                ErrorKind::InvalidInput);
  return p;
}

}  // namespace

ImportedModel importTorchScriptGraph(const std::shared_ptr<torch::jit::Graph>& graph,
                                     const std::vector<InputSpec>& inputs) {
  Prepared p = preparedGraph(graph, inputs);
  ImportedModel result;
  try {
    result.graph = buildGraph(p.graph, p.args, p.specs);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(torchMessage(e), ErrorKind::InvalidModel);
  }
  result.inputs = std::move(p.specs);
  return result;
}

SurveyResult surveyTorchScriptGraph(const std::shared_ptr<torch::jit::Graph>& graph,
                                    const std::vector<InputSpec>& inputs) {
  Prepared p = preparedGraph(graph, inputs);
  // libtorch cannot run operators it has no schema for (newer ones, from torch.export programs):
  // then there are no stand-ins and the walk stops at the first unsupported node.
  bool runnable = std::all_of(graph->nodes().begin(), graph->nodes().end(),
                              [](const jit::Node* n) { return !n->kind().is_aten() || n->maybeOperator(); });
  return surveyPrepared(p, runnable, "");
}

std::vector<NodeSupport> classifyTorchScriptGraph(const std::shared_ptr<torch::jit::Graph>& graph,
                                                  const std::vector<InputSpec>& inputs) {
  Prepared p = preparedGraph(graph, inputs);
  SurveyState state;
  state.shadow = shadowRun(p);
  try {
    buildGraph(p.graph, p.args, p.specs, &state);
  } catch (const InternalError&) {
    throw;
  } catch (const Error&) {
    // After the walk only the outputs can fail (a non-tensor result): the nodes are judged.
    if (state.nodes.empty()) throw;
  } catch (const std::exception& e) {
    throw Error(torchMessage(e), ErrorKind::InvalidModel);
  }
  return std::move(state.nodes);
}

}  // namespace kiln::importers

// ImportContext: value bookkeeping, typed argument reads and node emission for the importer.
#include "importers/torchscript/context.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <filesystem>

namespace kiln::importers::ts {
namespace {

std::string describe(const Item& item) {
  switch (item.kind) {
    case Item::Kind::Tensor: return "a tensor computed by the model";
    case Item::Kind::List: return "a list of tensors";
    case Item::Kind::Tuple: return "a tuple";
    case Item::Kind::Constant: break;
  }
  return "a constant of type " + item.constant.tagKind();
}

/// Kiln value names: TorchScript debug names without the ".N" suffix and the "self." prefix.
std::string stemOf(const jit::Value* value, const std::string& fallback) {
  if (!value->hasDebugName()) return fallback;
  std::string name = value->debugNameBase();
  if (name.rfind("self.", 0) == 0) name = name.substr(5);
  return name.empty() ? fallback : name;
}

}  // namespace

Item Item::ofTensor(ValueId id) {
  Item item;
  item.kind = Kind::Tensor;
  item.tensor = id;
  return item;
}

Item Item::ofConstant(c10::IValue value) {
  Item item;
  item.kind = Kind::Constant;
  item.constant = std::move(value);
  return item;
}

Item Item::ofSequence(std::vector<Item> elements, bool tuple) {
  Item item;
  item.kind = tuple ? Kind::Tuple : Kind::List;
  item.elements = std::move(elements);
  return item;
}

runtime::DType toKilnDType(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return runtime::DType::Float32;
    case c10::ScalarType::Double: return runtime::DType::Float64;
    case c10::ScalarType::Long: return runtime::DType::Int64;
    case c10::ScalarType::Int: return runtime::DType::Int32;
    case c10::ScalarType::Bool: return runtime::DType::Bool;
    case c10::ScalarType::Char: return runtime::DType::Int8;
    case c10::ScalarType::Byte: return runtime::DType::UInt8;
    default: break;
  }
  throw Error(std::string("tensors of dtype ") + c10::toString(type) + " are not supported",
              ErrorKind::Unsupported);
}

c10::ScalarType toTorchDType(runtime::DType type) {
  switch (type) {
    case runtime::DType::Float32: return c10::ScalarType::Float;
    case runtime::DType::Float64: return c10::ScalarType::Double;
    case runtime::DType::Int64: return c10::ScalarType::Long;
    case runtime::DType::Int32: return c10::ScalarType::Int;
    case runtime::DType::Bool: return c10::ScalarType::Bool;
    case runtime::DType::Int8: return c10::ScalarType::Char;
    case runtime::DType::UInt8: return c10::ScalarType::Byte;
  }
  KILN_ASSERT(false, "unknown dtype");
}

bool storageCovers(const at::Tensor& tensor) {
  if (!tensor.defined() || tensor.layout() != c10::kStrided || tensor.is_mkldnn() || tensor.numel() == 0)
    return true;
  if (!tensor.has_storage() || tensor.storage().data() == nullptr) return false;
  int64_t last = tensor.storage_offset();  // the last element's index in the storage
  if (last < 0) return false;
  for (int64_t i = 0; i < tensor.dim(); ++i) {
    int64_t span = 0;
    if (tensor.stride(i) < 0 || __builtin_mul_overflow(tensor.size(i) - 1, tensor.stride(i), &span) ||
        __builtin_add_overflow(last, span, &last))
      return false;
  }
  uint64_t needed = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(last) + 1, static_cast<uint64_t>(tensor.element_size()),
                             &needed))
    return false;
  return needed <= tensor.storage().nbytes();
}

runtime::Tensor toKilnTensor(const at::Tensor& tensor) {
  if (!storageCovers(tensor))
    throw Error("a constant tensor reaches past its storage (corrupt archive)", ErrorKind::InvalidModel);
  runtime::DType dtype = toKilnDType(tensor.scalar_type());
  at::Tensor dense = tensor.detach().to(at::kCPU).contiguous();
  runtime::Tensor out = runtime::Tensor::zeros(dtype, runtime::Shape(dense.sizes().begin(), dense.sizes().end()));
  KILN_ASSERT(out.nbytes() == dense.nbytes(), "constant tensor size mismatch");
  if (out.nbytes() != 0) std::memcpy(out.raw(), dense.data_ptr(), out.nbytes());
  return out;
}

// --- bookkeeping -----------------------------------------------------------------------------

void ImportContext::bind(const jit::Value* value, Item item) { m_items[value] = std::move(item); }

const Item& ImportContext::item(const jit::Value* value) const {
  auto it = m_items.find(value);
  KILN_ASSERT(it != m_items.end(), "TorchScript value %" + value->debugName() + " used before its definition");
  return it->second;
}

// --- typed reads -----------------------------------------------------------------------------

std::string ImportContext::argName(const jit::Node* node, size_t i) const {
  if (const c10::FunctionSchema* schema = node->maybeSchema()) {
    if (i < schema->arguments().size()) return "'" + schema->arguments()[i].name() + "'";
  }
  return "#" + std::to_string(i);
}

bool ImportContext::isNone(const jit::Node* node, size_t i) const {
  const Item& it = input(node, i);
  return it.isConstant() && it.constant.isNone();
}

ValueId ImportContext::tensor(const jit::Node* node, size_t i) {
  const Item& it = input(node, i);
  if (it.isTensor()) return it.tensor;
  if (it.isConstant() && it.constant.isTensor())
    return constant(it.constant.toTensor(), stemOf(node->input(i), "const"));
  fail(node, "argument " + argName(node, i) + " must be a tensor, got " + describe(it));
}

std::vector<ValueId> ImportContext::tensors(const jit::Node* node, size_t i) {
  const Item& it = input(node, i);
  std::vector<ValueId> out;
  if (it.kind == Item::Kind::List || it.kind == Item::Kind::Tuple) {
    for (const Item& e : it.elements) {
      if (e.isTensor()) out.push_back(e.tensor);
      else if (e.isConstant() && e.constant.isTensor()) out.push_back(constant(e.constant.toTensor()));
      else fail(node, "argument " + argName(node, i) + " must be a list of tensors");
    }
    return out;
  }
  if (it.isConstant() && it.constant.isTensorList()) {
    for (const at::Tensor& t : it.constant.toTensorVector()) out.push_back(constant(t));
    return out;
  }
  fail(node, "argument " + argName(node, i) + " must be a list of tensors, got " + describe(it));
}

int64_t ImportContext::toInt(const jit::Node* node, size_t i) const {
  const Item& it = input(node, i);
  if (it.isConstant() && (it.constant.isInt() || it.constant.isBool())) {
    return it.constant.isInt() ? it.constant.toInt() : static_cast<int64_t>(it.constant.toBool());
  }
  fail(node, "argument " + argName(node, i) + " must be a constant integer, got " + describe(it));
}

double ImportContext::toDouble(const jit::Node* node, size_t i) const {
  if (auto v = scalar(node, i)) return *v;
  fail(node, "argument " + argName(node, i) + " must be a constant number, got " + describe(input(node, i)));
}

bool ImportContext::toBool(const jit::Node* node, size_t i) const {
  const Item& it = input(node, i);
  if (it.isConstant() && it.constant.isBool()) return it.constant.toBool();
  if (it.isConstant() && it.constant.isInt()) return it.constant.toInt() != 0;
  fail(node, "argument " + argName(node, i) + " must be a constant bool, got " + describe(it));
}

std::string ImportContext::toString(const jit::Node* node, size_t i) const {
  const Item& it = input(node, i);
  if (it.isConstant() && it.constant.isString()) return it.constant.toStringRef();
  fail(node, "argument " + argName(node, i) + " must be a constant string, got " + describe(it));
}

std::vector<int64_t> ImportContext::toInts(const jit::Node* node, size_t i, size_t repeat) const {
  const Item& it = input(node, i);
  if (it.isConstant()) {
    if (it.constant.isIntList()) return it.constant.toIntVector();
    if (it.constant.isInt() && repeat > 0) return std::vector<int64_t>(repeat, it.constant.toInt());
    if (it.constant.isList()) {
      std::vector<int64_t> out;
      for (const c10::IValue& e : it.constant.toListRef()) {
        if (!e.isInt()) fail(node, "argument " + argName(node, i) + " must be a list of constant integers");
        out.push_back(e.toInt());
      }
      return out;
    }
  }
  fail(node, "argument " + argName(node, i) + " must be a list of constant integers, got " + describe(it));
}

std::optional<double> ImportContext::scalar(const jit::Node* node, size_t i) const {
  const Item& it = input(node, i);
  if (!it.isConstant()) return std::nullopt;
  const c10::IValue& v = it.constant;
  if (v.isDouble()) return v.toDouble();
  if (v.isInt()) return static_cast<double>(v.toInt());
  if (v.isBool()) return v.toBool() ? 1.0 : 0.0;
  if (v.isTensor() && v.toTensor().dim() == 0) return v.toTensor().item<double>();
  return std::nullopt;
}

const at::Tensor* ImportContext::constantTensor(const jit::Node* node, size_t i) const {
  const Item& it = input(node, i);
  if (it.isConstant() && it.constant.isTensor()) return &it.constant.toTensor();
  return nullptr;
}

// --- building --------------------------------------------------------------------------------

ValueId ImportContext::constant(const at::Tensor& tensor, const std::string& stem) {
  auto it = m_constants.find(tensor.unsafeGetTensorImpl());
  if (it != m_constants.end()) return it->second;
  ValueId id = m_graph.addConstant(stem, toKilnTensor(tensor));
  m_constants.emplace(tensor.unsafeGetTensorImpl(), id);
  m_keepAlive.push_back(tensor);
  return id;
}

ValueId ImportContext::scalarConstant(double value, runtime::DType dtype) {
  auto key = std::make_pair(dtype, value);
  auto it = m_scalars.find(key);
  if (it != m_scalars.end() && !std::isnan(value)) return it->second;
  at::Tensor t = at::scalar_tensor(value, at::TensorOptions().dtype(toTorchDType(dtype)));
  ValueId id = m_graph.addConstant("scalar", toKilnTensor(t));
  m_scalars.emplace(key, id);
  return id;
}

ValueId ImportContext::emit(const jit::Node* node, const std::string& op, std::vector<ValueId> inputs,
                            core::Attrs attrs, const std::string& stemOverride) {
  auto outs = emitAll(node, op, std::move(inputs), std::move(attrs), stemOverride);
  KILN_ASSERT(outs.size() == 1, op + " does not have exactly one output");
  return outs[0];
}

std::vector<ValueId> ImportContext::emitAll(const jit::Node* node, const std::string& op, std::vector<ValueId> inputs,
                                            core::Attrs attrs, const std::string& stemOverride) {
  std::string stem = !stemOverride.empty() ? stemOverride
                     : node->outputs().empty() ? op
                                               : stemOf(node->output(0), op);
  try {
    return m_graph.addNode(op, std::move(inputs), std::move(attrs), location(node), stem);
  } catch (const InternalError&) {
    throw;
  } catch (const Error& e) {
    throw Error(std::string(node->kind().toQualString()) + ": " + e.what(), e.kind());
  }
}

// --- diagnostics -----------------------------------------------------------------------------

std::string ImportContext::location(const jit::Node* node) {
  // Loaded modules carry ranges into their serialized code; the range that generated it points
  // at the model's Python source.
  jit::SourceRange range = node->sourceRange();
  if (auto original = range.findSourceRangeThatGenerated()) range = *original;
  auto flc = range.file_line_col();
  if (!flc) return {};
  const std::string& file = std::get<0>(*flc);
  if (file.empty()) return {};
  return std::filesystem::path(file).filename().string() + ":" + std::to_string(std::get<1>(*flc));
}

void ImportContext::fail(const jit::Node* node, const std::string& why, ErrorKind kind) {
  std::string where = location(node);
  throw Error(std::string(node->kind().toQualString()) + ": " + why + (where.empty() ? "" : " (" + where + ")"),
              kind);
}

void ImportContext::notSupported(const jit::Node* node, const std::string& hint) {
  std::string where = location(node);
  throw Error(std::string(node->kind().toQualString()) + " is not supported" + (hint.empty() ? "" : ": " + hint) +
                  (where.empty() ? "" : " (" + where + ")"),
              ErrorKind::Unsupported);
}

}  // namespace kiln::importers::ts

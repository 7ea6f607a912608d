// In-place writes through slice/select views, made functional at import (view_writes.h).
#include "importers/torchscript/view_writes.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "importers/torchscript/archive.h"
#include "importers/torchscript/aten_helpers.h"

namespace kiln::importers::ts {
namespace {

bool isViewNode(const jit::Node* node) {
  return node->kind() == c10::aten::slice || node->kind() == c10::aten::select;
}

bool writesFirstArgument(const jit::Node* node) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema || schema->arguments().empty() || node->inputs().empty() || node->outputs().empty()) return false;
  const c10::AliasInfo* alias = schema->arguments()[0].alias_info();
  return alias && alias->isWrite();
}

/// The part of the base a chain of views selects: per base axis its first index and length, and
/// which base axes the view still has (select drops one).
struct Region {
  Shape start, length;
  std::vector<int64_t> axes;  // view axis → base axis
};

Region regionOf(ImportContext& c, const jit::Node* write, const Shape& baseShape,
                const std::vector<const jit::Node*>& chain) {
  Region r{Shape(baseShape.size(), 0), baseShape, {}};
  for (size_t a = 0; a < baseShape.size(); ++a) r.axes.push_back(static_cast<int64_t>(a));
  for (const jit::Node* view : chain) {
    int64_t rank = static_cast<int64_t>(r.axes.size());
    int64_t dim = normDim(view, c.toInt(view, 1), rank);
    int64_t axis = r.axes[dim], size = r.length[axis];
    if (view->kind() == c10::aten::select) {
      int64_t index = c.toInt(view, 2);
      if (index < -size || index >= size)
        ImportContext::fail(view, "index " + std::to_string(index) + " out of range", ErrorKind::InvalidModel);
      r.start[axis] += index < 0 ? index + size : index;
      r.length[axis] = 1;
      r.axes.erase(r.axes.begin() + dim);
      continue;
    }
    if (c.toInt(view, 4) != 1)
      ImportContext::notSupported(write, "it writes through a strided slice into a tensor computed by the model");
    auto bound = [&](size_t i, int64_t dflt) {
      if (c.isNone(view, i)) return dflt;
      int64_t v = c.toInt(view, i);
      return std::clamp<int64_t>(v < 0 ? v + size : v, 0, size);
    };
    int64_t b = bound(2, 0), e = std::max(b, bound(3, size));
    r.start[axis] += b;
    r.length[axis] = e - b;
  }
  return r;
}

/// Runs a jit node's operator on `self` followed by the node's other (constant) inputs.
c10::IValue runOn(ImportContext& c, const jit::Node* node, const at::Tensor& self, jit::Stack* outputs = nullptr) {
  jit::Stack stack{self};
  for (size_t i = 1; i < node->inputs().size(); ++i) stack.push_back(c.input(node, i).constant);
  try {
    node->getOperation()(stack);
  } catch (const std::exception& e) {
    ImportContext::fail(node, firstLine(e.what()), ErrorKind::InvalidModel);
  }
  if (outputs) *outputs = stack;
  return stack.empty() ? c10::IValue() : stack.front();
}

/// True when `node`'s first output shares storage with its first input by its schema
/// (`Tensor(a) self -> Tensor(a)`: views, and in-place ops returning self).
bool returnsViewOfSelf(const jit::Node* node) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema || schema->arguments().empty() || schema->returns().empty()) return false;
  const c10::AliasInfo* in = schema->arguments()[0].alias_info();
  const c10::AliasInfo* out = schema->returns()[0].alias_info();
  return in && out && !in->beforeSets().empty() && in->beforeSets() == out->beforeSets();
}

/// True when `node` returns none of the tensors it reads (einsum, cat, stack on a list: a schema
/// without alias annotations on its results).
bool readsContainer(const jit::Node* node) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema) return false;
  for (const c10::Argument& r : schema->returns()) {
    if (r.alias_info()) return false;
  }
  return true;
}

/// Every value that shares storage with `base`: views of it (and views of those), what it is a
/// view of, lists and tuples holding one, and whatever is taken out of those (any reader of a
/// container that may return one of its tensors, conservatively).
std::set<const jit::Value*> storageSharers(const jit::Value* base) {
  std::set<const jit::Value*> shared{base};
  std::vector<const jit::Value*> work{base};
  auto add = [&](const jit::Value* v) {
    if (shared.insert(v).second) work.push_back(v);
  };
  while (!work.empty()) {
    const jit::Value* v = work.back();
    work.pop_back();
    const jit::Node* producer = v->node();
    if (returnsViewOfSelf(producer) && v == producer->output(0)) add(producer->input(0));
    bool container = v->type()->kind() != c10::TypeKind::TensorType;
    for (const jit::Use& use : v->uses()) {
      const jit::Node* user = use.user;
      c10::Symbol kind = user->kind();
      if (kind == c10::prim::Return) continue;
      if (kind == c10::prim::ListConstruct || kind == c10::prim::TupleConstruct) {
        add(user->output());
      } else if (use.offset == 0 && returnsViewOfSelf(user)) {
        add(user->output(0));
      } else if (container && !readsContainer(user)) {
        for (const jit::Value* out : user->outputs()) add(out);
      }
    }
  }
  return shared;
}

/// Any value sharing storage with `base` that exists before `write` and is read after it (other
/// than `base` itself, which is rebound to the written value) would read a stale value: refused,
/// and so is a write whose base shares storage with a model input.
void checkNoStaleAlias(const jit::Node* write, const jit::Value* base) {
  std::set<const jit::Value*> shared = storageSharers(base);
  for (const jit::Value* v : shared) {
    if (v->node()->kind() == c10::prim::Param)
      ImportContext::notSupported(write, "it writes into the model input %" + v->debugNameBase() + " through a view");
  }
  const jit::Block* block = write->owningBlock();
  for (const jit::Node* next = write->next();; next = next->next()) {
    for (const jit::Value* v : next->inputs()) {
      if (v == base || !shared.count(v)) continue;
      if (v->node()->isBefore(write))
        ImportContext::notSupported(write, "it writes through a view into a tensor that is read later through "
                                           "another alias (%" + v->debugNameBase() + ")");
    }
    if (next == block->return_node()) break;
  }
}

}  // namespace

bool importViewWrite(ImportContext& c, const jit::Node* node, const std::function<void()>& mapWrite) {
  if (!writesFirstArgument(node)) return false;
  std::vector<const jit::Node*> chain;
  const jit::Value* base = node->input(0);
  while (isViewNode(base->node())) {
    chain.insert(chain.begin(), base->node());
    base = base->node()->input(0);
  }
  if (chain.empty()) return false;
  if (base->node()->kind() == c10::prim::Param)
    ImportContext::notSupported(node, "it writes into the model input %" + base->debugNameBase() + " through a view");
  for (const jit::Node* view : chain) {
    for (size_t i = 1; i < view->inputs().size(); ++i) {
      if (!c.input(view, i).isConstant())
        ImportContext::notSupported(node, "it writes through a view whose bounds are computed by the model");
    }
  }
  checkNoStaleAlias(node, base);

  const Item baseItem = c.item(base);
  bool constantWrite = baseItem.isConstant() && baseItem.constant.isTensor();
  for (size_t i = 1; i < node->inputs().size(); ++i) constantWrite = constantWrite && c.input(node, i).isConstant();
  if (constantWrite) {
    // Everything is known: libtorch writes into a copy of the base (the weight it may come from
    // stays untouched).
    at::Tensor updated = baseItem.constant.toTensor().clone();
    at::Tensor view = updated;
    for (const jit::Node* v : chain) view = runOn(c, v, view).toTensor();
    jit::Stack results;
    runOn(c, node, view, &results);
    c.bind(base, Item::ofConstant(updated));
    for (size_t i = 0; i < node->outputs().size() && i < results.size(); ++i)
      c.bind(node->output(i), Item::ofConstant(results[i]));
    return true;
  }

  if (!baseItem.isTensor() && !(baseItem.isConstant() && baseItem.constant.isTensor()))
    ImportContext::notSupported(node, "it writes through a view into something that is not a tensor");
  ValueId baseId = baseItem.isTensor() ? baseItem.tensor : c.constant(baseItem.constant.toTensor(), "written");
  const core::TensorType baseType = c.type(baseId);
  Region region = regionOf(c, node, baseType.shape, chain);
  mapWrite();  // the view's value after the write
  const Item& written = c.item(node->output(0));
  ValueId value = written.isTensor() ? written.tensor : c.constant(written.constant.toTensor(), "written");
  ValueId updated = emitRegionScatter(c, node, baseId, value, region.start, region.length);
  c.bind(base, Item::ofTensor(updated));
  return true;
}

}  // namespace kiln::importers::ts

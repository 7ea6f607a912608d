// The aten:: ops that create or overwrite whole tensors: new_zeros/new_ones/new_full/new_empty
// (constants of a static shape, whatever `self` holds), and the in-place writes fill_, zero_
// and copy_ as their functional value (the tensor `self` holds afterwards). A write into a view
// (`mask[0:4, 2:] = 1`, `bias[n:2 * n].zero_()`) is completed by the walker (importer.cpp,
// visitViewWrite), which puts that value back into the viewed tensor.
#include <ATen/ATen.h>

#include "importers/torchscript/aten_helpers.h"
#include "importers/torchscript/context.h"

namespace kiln::importers::ts {
namespace {

/// Shape and dtype of input `i`, a graph tensor or a constant tensor.
std::pair<Shape, c10::ScalarType> shapeAndDType(Ctx& c, N n, size_t i) {
  const Item& item = c.input(n, i);
  if (item.isTensor()) {
    core::TensorType t = c.type(item.tensor);
    return {t.shape, toTorchDType(t.dtype)};
  }
  if (item.isConstant() && item.constant.isTensor()) {
    const at::Tensor& t = item.constant.toTensor();
    return {Shape(t.sizes().begin(), t.sizes().end()), t.scalar_type()};
  }
  Ctx::fail(n, "argument " + c.argName(n, i) + " must be a tensor", ErrorKind::InvalidModel);
}

/// new_zeros(self, size, dtype, layout, device, pin_memory) and the like: a constant of `size`,
/// of `dtype` or else self's dtype, filled with `fill` (new_full: its fill_value argument).
/// new_empty's contents are unspecified: zeros.
void newConstant(Ctx& c, N n, std::optional<double> fill) {
  auto [shape, dtype] = shapeAndDType(c, n, 0);
  Shape size = c.toInts(n, 1);
  size_t dtypeArg = fill ? 2 : 3;  // new_full(self, size, fill_value, dtype, ...)
  if (dtypeArg < n->inputs().size() && !c.isNone(n, dtypeArg))
    dtype = static_cast<c10::ScalarType>(c.toInt(n, dtypeArg));
  if (!fill) fill = c.scalar(n, 2);
  if (!fill) Ctx::fail(n, "the fill value must be a constant number");
  toKilnDType(dtype);  // only dtypes Kiln has
  c.bind(n->output(), Item::ofConstant(at::full(size, *fill, at::TensorOptions().dtype(dtype))));
}

/// fill_(self, value): self's shape and dtype filled with a number (a constant), or with a rank-0
/// tensor computed by the model (broadcast).
void fill(Ctx& c, N n) {
  auto [shape, dtype] = shapeAndDType(c, n, 0);
  if (auto v = c.scalar(n, 1)) {
    c.bind(n->output(), Item::ofConstant(at::full(shape, *v, at::TensorOptions().dtype(dtype))));
    return;
  }
  ValueId value = operand(c, n, 1, dtype);
  if (c.type(value).rank() != 0)
    Ctx::fail(n, "the fill value must be a number or a 0-dim tensor, got " + c.type(value).str(),
              ErrorKind::InvalidModel);
  c.setOutput(n, c.emit(n, "broadcast_to", {value}, {{"shape", shape}}));
}

void zero(Ctx& c, N n) {
  auto [shape, dtype] = shapeAndDType(c, n, 0);
  c.bind(n->output(), Item::ofConstant(at::zeros(shape, at::TensorOptions().dtype(dtype))));
}

/// copy_(self, src, non_blocking): src cast to self's dtype and broadcast to self's shape.
void copy(Ctx& c, N n) {
  auto [shape, dtype] = shapeAndDType(c, n, 0);
  if (const at::Tensor* src = c.constantTensor(n, 1)) {
    at::Tensor out = at::empty(shape, at::TensorOptions().dtype(dtype));
    try {
      out.copy_(*src);
    } catch (const std::exception&) {
      Ctx::fail(n, "cannot broadcast a source of shape " + c10::str(src->sizes()) + " to " +
                       runtime::shapeString(shape), ErrorKind::InvalidModel);
    }
    c.bind(n->output(), Item::ofConstant(out));
    return;
  }
  if (auto v = c.scalar(n, 1)) {
    c.bind(n->output(), Item::ofConstant(at::full(shape, *v, at::TensorOptions().dtype(dtype))));
    return;
  }
  ValueId x = operand(c, n, 1, dtype);
  if (c.type(x).shape != shape) x = c.emit(n, "broadcast_to", {x}, {{"shape", shape}});
  c.setOutput(n, x);
}

}  // namespace

void registerWriteOps(Table& t) {
  t["aten::new_zeros"] = [](Ctx& c, N n) { newConstant(c, n, 0.0); };
  t["aten::new_ones"] = [](Ctx& c, N n) { newConstant(c, n, 1.0); };
  t["aten::new_empty"] = [](Ctx& c, N n) { newConstant(c, n, 0.0); };
  t["aten::new_full"] = [](Ctx& c, N n) { newConstant(c, n, std::nullopt); };
  t["aten::fill_"] = fill;
  t["aten::zero_"] = zero;
  t["aten::copy_"] = copy;
}

}  // namespace kiln::importers::ts

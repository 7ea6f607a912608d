// The aten:: ops that create or overwrite whole tensors: new_zeros/new_ones/new_full/new_empty
// (constants of a static shape, whatever `self` holds), and the in-place writes fill_, zero_
// and copy_ as their functional value (the tensor `self` holds afterwards). A write into a view
// (`mask[0:4, 2:] = 1`, `bias[n:2 * n].zero_()`) is completed by the walker (importer.cpp,
// view_writes.h), which puts that value back into the viewed tensor with emitRegionScatter, as
// slice_scatter and select_scatter (torch.export's form of those writes) do here.
#include <ATen/ATen.h>

#include <algorithm>

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

/// slice_scatter(self, src, dim, start, end, step) and select_scatter(self, src, dim, index): self
/// with a slice (step 1) or an index along `dim` replaced by src (what torch.export programs hold
/// for writes through views).
void sliceScatter(Ctx& c, N n) {
  ValueId base = c.tensor(n, 0), src = c.tensor(n, 1);
  const Shape shape = c.type(base).shape;
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t dim = normDim(n, c.toInt(n, 2), rank), size = shape[dim];
  Shape start(shape.size(), 0), length = shape;
  if (n->kind() == c10::Symbol::fromQualString("aten::select_scatter")) {
    int64_t index = c.toInt(n, 3);
    if (index < -size || index >= size)
      Ctx::fail(n, "index " + std::to_string(index) + " out of range", ErrorKind::InvalidModel);
    start[dim] = index < 0 ? index + size : index;
    length[dim] = 1;
  } else {
    if (n->inputs().size() > 5 && c.toInt(n, 5) != 1) Ctx::notSupported(n, "a step other than 1");
    auto bound = [&](size_t i, int64_t dflt) {
      if (i >= n->inputs().size() || c.isNone(n, i)) return dflt;
      int64_t v = c.toInt(n, i);
      return std::clamp<int64_t>(v < 0 ? v + size : v, 0, size);
    };
    int64_t b = bound(3, 0), e = std::max(b, bound(4, size));
    start[dim] = b;
    length[dim] = e - b;
  }
  int64_t expected = 1;
  for (int64_t l : length) expected *= l;
  if (c.type(src).numel() != expected)
    Ctx::fail(n, "src " + c.type(src).str() + " does not fit the region", ErrorKind::InvalidModel);
  c.setOutput(n, emitRegionScatter(c, n, base, src, start, length));
}

}  // namespace

ValueId emitRegionScatter(Ctx& c, N n, ValueId base, ValueId value, const Shape& start, const Shape& length) {
  const core::TensorType baseType = c.type(base);
  if (c.type(value).dtype != baseType.dtype)
    value = c.emit(n, "cast", {value}, {{"dtype", std::string(runtime::dtypeName(baseType.dtype))}}, "written");
  value = reshapeTo(c, n, value, length, "written");
  std::vector<int64_t> pad;  // PyTorch's order: last axis first
  for (size_t a = baseType.shape.size(); a-- > 0;) {
    pad.push_back(start[a]);
    pad.push_back(baseType.shape[a] - start[a] - length[a]);
  }
  at::Tensor mask = at::zeros(baseType.shape, at::kBool);
  at::Tensor inside = mask;
  for (size_t a = 0; a < baseType.shape.size(); ++a) inside = inside.narrow(static_cast<int64_t>(a), start[a], length[a]);
  inside.fill_(true);
  ValueId padded = emitTorchPad(c, n, value, pad, "constant", 0.0, "written_padded");
  return c.emit(n, "where", {c.constant(mask, "written_mask"), padded, base}, {}, "written");
}

void registerWriteOps(Table& t) {
  t["aten::new_zeros"] = [](Ctx& c, N n) { newConstant(c, n, 0.0); };
  t["aten::new_ones"] = [](Ctx& c, N n) { newConstant(c, n, 1.0); };
  t["aten::new_empty"] = [](Ctx& c, N n) { newConstant(c, n, 0.0); };
  t["aten::new_full"] = [](Ctx& c, N n) { newConstant(c, n, std::nullopt); };
  t["aten::fill_"] = fill;
  t["aten::zero_"] = zero;
  t["aten::copy_"] = copy;
  t["aten::slice_scatter"] = sliceScatter;
  t["aten::select_scatter"] = sliceScatter;
}

}  // namespace kiln::importers::ts

// aten:: → Kiln mappings for indexing, selection, comparisons, casts and selecting reductions:
// slicing (with steps), select/narrow, chunk/split/unbind, index/index_select/embedding,
// expand/repeat, masked_fill/where, eq/ne/lt/le/gt/ge, logical ops on masks, dtype casts,
// max/min/amax/amin/argmax/argmin, topk/sort and log_softmax.
#include <limits>

#include "importers/torchscript/aten_helpers.h"

namespace kiln::importers::ts {
namespace {

// --- slicing ---------------------------------------------------------------------------------

/// x[begin:end:step] along `axis` (Python semantics: None/negative/out-of-range bounds).
ValueId sliceAxis(Ctx& c, N n, ValueId x, int64_t axis, std::optional<int64_t> start, std::optional<int64_t> end,
                  int64_t step, const std::string& stem = {}) {
  if (step <= 0) Ctx::fail(n, "slice step must be positive, got " + std::to_string(step), ErrorKind::InvalidModel);
  const Shape s = c.type(x).shape;
  int64_t dim = s[axis];
  auto clampIndex = [dim](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + dim : v, 0, dim); };
  int64_t b = start ? clampIndex(*start) : 0, e = end ? clampIndex(*end) : dim;
  e = std::max(b, e);
  if (b == 0 && e == dim && step == 1) return x;
  std::vector<int64_t> begin(s.size(), 0), ends(s), strides(s.size(), 1);
  begin[axis] = b;
  ends[axis] = e;
  strides[axis] = step;
  return c.emit(n, "strided_slice", {x}, {{"begin", begin}, {"end", ends}, {"strides", strides}}, stem);
}

std::optional<int64_t> optionalInt(Ctx& c, N n, size_t i) {
  if (i >= n->inputs().size() || c.isNone(n, i)) return std::nullopt;
  return c.toInt(n, i);
}

bool isTensorInput(N n, size_t i) { return n->input(i)->type()->kind() == c10::TypeKind::TensorType; }

void slice(Ctx& c, N n) {
  // slice(self, dim, start, end, step); list slices are folded by the walker when constant.
  if (!isTensorInput(n, 0)) Ctx::notSupported(n, "slicing a list of tensors computed by the model");
  ValueId x = c.tensor(n, 0);
  int64_t axis = normDim(n, c.toInt(n, 1), c.type(x).rank());
  c.setOutput(n, sliceAxis(c, n, x, axis, optionalInt(c, n, 2), optionalInt(c, n, 3), c.toInt(n, 4)));
}

/// x[..., i, ...] along `axis`: a one-element slice with the axis dropped.
ValueId selectAxis(Ctx& c, N n, ValueId x, int64_t axis, int64_t index, const std::string& stem = {}) {
  Shape s = c.type(x).shape;
  if (index < -s[axis] || index >= s[axis])
    Ctx::fail(n, "index " + std::to_string(index) + " out of range for dimension " + std::to_string(axis) +
                     " of " + c.type(x).str(), ErrorKind::InvalidModel);
  if (index < 0) index += s[axis];
  ValueId y = sliceAxis(c, n, x, axis, index, index + 1, 1, "selected");
  s.erase(s.begin() + axis);
  return reshapeTo(c, n, y, s, stem);
}

void select(Ctx& c, N n) {
  if (!isTensorInput(n, 0)) Ctx::notSupported(n, "indexing a list of tensors computed by the model");
  ValueId x = c.tensor(n, 0);
  if (c.type(x).rank() == 0) Ctx::fail(n, "select on a scalar", ErrorKind::InvalidModel);
  int64_t axis = normDim(n, c.toInt(n, 1), c.type(x).rank());
  c.setOutput(n, selectAxis(c, n, x, axis, c.toInt(n, 2)));
}

void narrow(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  int64_t axis = normDim(n, c.toInt(n, 1), c.type(x).rank());
  int64_t start = c.toInt(n, 2), length = c.toInt(n, 3);
  if (start < 0) start += c.type(x).shape[axis];
  c.setOutput(n, sliceAxis(c, n, x, axis, start, start + length, 1));
}

/// Binds the node's list output to consecutive pieces of `sizes` along `axis`.
void bindPieces(Ctx& c, N n, ValueId x, int64_t axis, const std::vector<int64_t>& sizes) {
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (total != c.type(x).shape[axis])
    Ctx::fail(n, "split sizes do not add up to dimension " + std::to_string(axis) + " of " + c.type(x).str(),
              ErrorKind::InvalidModel);
  std::vector<Item> pieces;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    pieces.push_back(Item::ofTensor(sliceAxis(c, n, x, axis, offset, offset + s, 1, "piece")));
    offset += s;
  }
  c.bind(n->output(), Item::ofSequence(std::move(pieces), false));
}

/// Equal pieces of `size` (the last one smaller) along `axis`.
std::vector<int64_t> evenPieces(int64_t dim, int64_t size) {
  std::vector<int64_t> sizes;
  for (int64_t offset = 0; offset < dim; offset += size) sizes.push_back(std::min(size, dim - offset));
  if (sizes.empty()) sizes.push_back(0);
  return sizes;
}

void chunk(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  int64_t chunks = c.toInt(n, 1);
  int64_t axis = normDim(n, c.toInt(n, 2), c.type(x).rank());
  if (chunks <= 0) Ctx::fail(n, "chunks must be positive", ErrorKind::InvalidModel);
  int64_t dim = c.type(x).shape[axis];
  bindPieces(c, n, x, axis, evenPieces(dim, std::max<int64_t>(1, (dim + chunks - 1) / chunks)));
}

void split(Ctx& c, N n) {
  // split(self, split_size: int | int[], dim) and split_with_sizes(self, int[], dim).
  if (!isTensorInput(n, 0)) return Ctx::notSupported(n, "splitting a string or list computed by the model");
  ValueId x = c.tensor(n, 0);
  int64_t axis = normDim(n, c.toInt(n, 2), c.type(x).rank());
  const Item& sizes = c.input(n, 1);
  if (sizes.isConstant() && sizes.constant.isInt()) {
    int64_t size = sizes.constant.toInt();
    if (size <= 0) Ctx::fail(n, "split_size must be positive", ErrorKind::InvalidModel);
    return bindPieces(c, n, x, axis, evenPieces(c.type(x).shape[axis], size));
  }
  bindPieces(c, n, x, axis, c.toInts(n, 1));
}

void unbind(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  int64_t axis = normDim(n, c.toInt(n, 1), c.type(x).rank());
  std::vector<Item> pieces;
  for (int64_t i = 0; i < c.type(x).shape[axis]; ++i) pieces.push_back(Item::ofTensor(selectAxis(c, n, x, axis, i, "piece")));
  c.bind(n->output(), Item::ofSequence(std::move(pieces), false));
}

// --- gathers ---------------------------------------------------------------------------------

ValueId indexTensor(Ctx& c, N n, size_t i) {
  ValueId idx = c.tensor(n, i);
  DType t = c.type(idx).dtype;
  if (t == DType::Bool || t == DType::UInt8)
    Ctx::notSupported(n, "boolean-mask indexing (its result shape depends on the data)");
  if (t != DType::Int64 && t != DType::Int32)
    Ctx::fail(n, "indices must be an integer tensor, got " + c.type(idx).str(), ErrorKind::InvalidModel);
  return idx;
}

void indexSelect(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  int64_t axis = normDim(n, c.toInt(n, 1), c.type(x).rank());
  ValueId idx = indexTensor(c, n, 2);
  if (c.type(idx).rank() > 1) Ctx::fail(n, "index must be 1-D, got " + c.type(idx).str(), ErrorKind::InvalidModel);
  c.setOutput(n, c.emit(n, "take", {x, idx}, {{"axis", axis}}));
}

void embedding(Ctx& c, N n) {
  ValueId w = c.tensor(n, 0);
  if (c.type(w).rank() != 2) Ctx::fail(n, "weight must be 2-D, got " + c.type(w).str(), ErrorKind::InvalidModel);
  c.setOutput(n, c.emit(n, "take", {w, indexTensor(c, n, 1)}, {{"axis", int64_t{0}}}));
}

/// x[..., idx, ...]: aten::index with one index tensor (the others None, i.e. `:`).
void index(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  const Item& list = c.input(n, 1);
  std::vector<Item> elements;
  if (list.kind == Item::Kind::List) {
    elements = list.elements;
  } else if (list.isConstant() && list.constant.isList()) {
    for (const c10::IValue& e : list.constant.toListRef()) elements.push_back(Item::ofConstant(e));
  } else {
    Ctx::fail(n, "indices must be a list");
  }
  int64_t axis = -1;
  ValueId idx = -1;
  for (size_t d = 0; d < elements.size(); ++d) {
    const Item& e = elements[d];
    if (e.isConstant() && e.constant.isNone()) continue;
    if (axis >= 0) Ctx::notSupported(n, "indexing with more than one index tensor");
    axis = static_cast<int64_t>(d);
    idx = e.isTensor() ? e.tensor : c.constant(e.constant.toTensor(), "index");
  }
  if (axis < 0) return c.setOutput(n, x);
  DType t = c.type(idx).dtype;
  if (t == DType::Bool || t == DType::UInt8)
    Ctx::notSupported(n, "boolean-mask indexing (its result shape depends on the data)");
  if (axis >= c.type(x).rank()) Ctx::fail(n, "too many indices for " + c.type(x).str(), ErrorKind::InvalidModel);
  c.setOutput(n, c.emit(n, "take", {x, idx}, {{"axis", axis}}));
}

// --- broadcasting copies ---------------------------------------------------------------------

ValueId broadcastTo(Ctx& c, N n, ValueId x, const Shape& shape, const std::string& stem = {}) {
  if (c.type(x).shape == shape) return x;
  return c.emit(n, "broadcast_to", {x}, {{"shape", shape}}, stem);
}

void expand(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  const Shape s = c.type(x).shape;
  Shape target = c.toInts(n, 1);
  if (target.size() < s.size()) Ctx::fail(n, "expand to fewer dimensions than " + c.type(x).str(), ErrorKind::InvalidModel);
  size_t lead = target.size() - s.size();
  for (size_t d = 0; d < target.size(); ++d) {
    if (target[d] == -1) {
      if (d < lead) Ctx::fail(n, "-1 in a new leading dimension", ErrorKind::InvalidModel);
      target[d] = s[d - lead];
    }
  }
  c.setOutput(n, broadcastTo(c, n, x, target));
}

void expandAs(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  c.setOutput(n, broadcastTo(c, n, x, c.type(c.tensor(n, 1)).shape));
}

/// repeat: [s0, s1] by [r0, r1] = reshape [1, s0, 1, s1] → broadcast [r0, s0, r1, s1] → merge.
void repeat(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  Shape s = c.type(x).shape;
  std::vector<int64_t> reps = c.toInts(n, 1);
  if (reps.size() < s.size()) Ctx::fail(n, "fewer repeats than dimensions of " + c.type(x).str(), ErrorKind::InvalidModel);
  s.insert(s.begin(), reps.size() - s.size(), 1);
  Shape interleaved, expanded, merged;
  for (size_t d = 0; d < s.size(); ++d) {
    interleaved.insert(interleaved.end(), {1, s[d]});
    expanded.insert(expanded.end(), {reps[d], s[d]});
    merged.push_back(reps[d] * s[d]);
  }
  ValueId y = reshapeTo(c, n, x, interleaved, "repeat_in");
  y = broadcastTo(c, n, y, expanded, "repeat_wide");
  c.setOutput(n, reshapeTo(c, n, y, merged));
}

/// aten::roll(x, shifts, dims): each listed axis rotated by its shift (elements pushed past the
/// end come back at the start), as two slices concatenated the other way round. Without dims
/// the flattened tensor is rolled and reshaped back, as PyTorch does.
void roll(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  std::vector<int64_t> shifts = c.toInts(n, 1), dims = c.toInts(n, 2);
  const Shape shape = c.type(x).shape;
  bool flat = dims.empty();
  if (flat) {
    if (shifts.size() != 1) Ctx::fail(n, "roll without dims takes one shift", ErrorKind::InvalidModel);
    x = reshapeTo(c, n, x, {c.type(x).numel()}, "roll_flat");
    dims = {0};
  }
  if (shifts.size() != dims.size())
    Ctx::fail(n, std::to_string(shifts.size()) + " shifts for " + std::to_string(dims.size()) + " dims",
              ErrorKind::InvalidModel);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t axis = normDim(n, dims[i], c.type(x).rank());
    int64_t size = c.type(x).shape[axis];
    if (size == 0) continue;
    int64_t k = ((shifts[i] % size) + size) % size;  // the first output element is input[size - k]
    if (k == 0) continue;
    ValueId tail = sliceAxis(c, n, x, axis, size - k, size, 1, "roll_tail");
    ValueId head = sliceAxis(c, n, x, axis, 0, size - k, 1, "roll_head");
    x = c.emit(n, "concat", {tail, head}, {{"axis", axis}}, "roll");
  }
  if (flat) x = reshapeTo(c, n, x, shape, "roll_out");
  c.setOutput(n, x);
}

// --- masks, comparisons, casts ---------------------------------------------------------------

ValueId castTo(Ctx& c, N n, ValueId x, DType dtype, const std::string& stem = {}) {
  if (c.type(x).dtype == dtype) return x;
  return c.emit(n, "cast", {x}, {{"dtype", std::string(runtime::dtypeName(dtype))}}, stem);
}

ValueId boolTensor(Ctx& c, N n, size_t i) { return castTo(c, n, c.tensor(n, i), DType::Bool, "mask"); }

/// where(cond, a, b) with operands a = input ia, b = input ib promoted together.
void emitWhere(Ctx& c, N n, ValueId cond, size_t ia, size_t ib) {
  c10::ScalarType dtype = at::result_type(promotionProbe(c, n, ia), promotionProbe(c, n, ib));
  ValueId a = operand(c, n, ia, dtype), b = operand(c, n, ib, dtype);
  c.setOutput(n, c.emit(n, "where", {cond, a, b}));
}

void where(Ctx& c, N n) {
  if (n->inputs().size() == 1) Ctx::notSupported(n, "where(condition) returns data-dependent indices");
  emitWhere(c, n, boolTensor(c, n, 0), 1, 2);
}

void maskedFill(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  ValueId mask = boolTensor(c, n, 1);
  auto value = c.scalar(n, 2);
  if (!value) Ctx::fail(n, "the fill value must be a constant number");
  ValueId fill = c.scalarConstant(*value, c.type(x).dtype);
  c.setOutput(n, c.emit(n, "where", {mask, fill, x}));
}

auto compare(const std::string& op) {
  return [op](Ctx& c, N n) {
    c10::ScalarType dtype = at::result_type(promotionProbe(c, n, 0), promotionProbe(c, n, 1));
    ValueId a = operand(c, n, 0, dtype), b = operand(c, n, 1, dtype);
    if (c.type(a).dtype == DType::Bool) {  // on masks: through where
      ValueId t = c.scalarConstant(1, DType::Bool), f = c.scalarConstant(0, DType::Bool);
      ValueId notB = c.emit(n, "where", {b, f, t}, {}, "not");
      if (op == "equal") return c.setOutput(n, c.emit(n, "where", {a, b, notB}));
      if (op == "not_equal") return c.setOutput(n, c.emit(n, "where", {a, notB, b}));
      Ctx::notSupported(n, "ordering comparisons of bool tensors");
    }
    c.setOutput(n, c.emit(n, op, {a, b}));
  };
}

void logicalNot(Ctx& c, N n) {
  ValueId x = boolTensor(c, n, 0);
  c.setOutput(n, c.emit(n, "where", {x, c.scalarConstant(0, DType::Bool), c.scalarConstant(1, DType::Bool)}));
}

/// any(self[, dim | dims][, keepdim]) / all(...): whether any (all) element along the axes is
/// non-zero, as max (min) of the 0/1 values, compared with 0. No axes: every axis.
auto anyAll(bool isAny) {
  return [isAny](Ctx& c, N n) {
    ValueId x = boolTensor(c, n, 0);
    const int64_t rank = c.type(x).rank();
    std::vector<int64_t> axes;
    bool keep = false;
    if (n->inputs().size() > 1) {
      if (!c.isNone(n, 1)) axes = c.toInts(n, 1, 1);
      if (n->inputs().size() > 2) keep = c.toBool(n, 2);
    }
    if (axes.empty())
      for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
    for (int64_t& a : axes) a = normDim(n, a, rank);
    ValueId ones = castTo(c, n, x, DType::Float32, isAny ? "any_in" : "all_in");
    ValueId r = rank == 0 ? ones
                          : c.emit(n, isAny ? "max" : "min", {ones},
                                   {{"axes", axes}, {"keepdims", static_cast<int64_t>(keep)}}, isAny ? "any" : "all");
    c.setOutput(n, c.emit(n, "not_equal", {r, c.scalarConstant(0, DType::Float32)}));
  };
}

/// and/or on bool tensors (bitwise ops on integers are not mapped).
auto logical(bool isAnd) {
  return [isAnd](Ctx& c, N n) {
    for (size_t i : {0, 1}) {
      if (c.input(n, i).isTensor() && c.type(c.input(n, i).tensor).dtype != DType::Bool)
        Ctx::notSupported(n, "bitwise operations on integer tensors");
    }
    ValueId a = boolTensor(c, n, 0), b = boolTensor(c, n, 1);
    ValueId y = isAnd ? c.emit(n, "where", {a, b, c.scalarConstant(0, DType::Bool)})
                      : c.emit(n, "where", {a, c.scalarConstant(1, DType::Bool), b});
    c.setOutput(n, y);
  };
}

/// aten::to / type_as / float-style conversions: a cast when the dtype changes, else identity.
void toDType(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  const c10::FunctionSchema& schema = n->schema();
  std::optional<DType> target;
  for (size_t i = 1; i < n->inputs().size() && i < schema.arguments().size(); ++i) {
    const std::string& name = schema.arguments()[i].name();
    if (name == "dtype" && !c.isNone(n, i)) target = toKilnDType(static_cast<c10::ScalarType>(c.toInt(n, i)));
    if (name == "other") target = c.type(c.tensor(n, i)).dtype;
  }
  c.setOutput(n, target ? castTo(c, n, x, *target) : x);
}

// --- selecting reductions --------------------------------------------------------------------

std::vector<int64_t> allAxes(int64_t rank) {
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  return axes;
}

ValueId reduceExtreme(Ctx& c, N n, const std::string& op, ValueId x, std::vector<int64_t> axes, bool keep,
                      const std::string& stem = {}) {
  int64_t rank = c.type(x).rank();
  if (axes.empty()) axes = allAxes(rank);
  for (int64_t& a : axes) a = normDim(n, a, rank);
  if (c.type(x).numel() == 0) Ctx::fail(n, "reducing an empty tensor", ErrorKind::InvalidModel);
  return c.emit(n, op, {x}, {{"axes", axes}, {"keepdims", static_cast<int64_t>(keep)}}, stem);
}

/// max / min: (self) → all; .dim (self, dim, keepdim) → (values, indices); .other → elementwise.
auto maxMin(bool isMax) {
  return [isMax](Ctx& c, N n) {
    const std::string reduceOp = isMax ? "max" : "min";
    if (n->inputs().size() == 2 && isTensorInput(n, 1)) {
      c10::ScalarType dtype = at::result_type(promotionProbe(c, n, 0), promotionProbe(c, n, 1));
      ValueId a = operand(c, n, 0, dtype), b = operand(c, n, 1, dtype);
      return c.setOutput(n, c.emit(n, isMax ? "maximum" : "minimum", {a, b}));
    }
    ValueId x = c.tensor(n, 0);
    if (n->inputs().size() == 1) return c.setOutput(n, reduceExtreme(c, n, reduceOp, x, {}, false));
    int64_t axis = normDim(n, c.toInt(n, 1), c.type(x).rank());
    bool keep = n->inputs().size() > 2 && c.toBool(n, 2);
    c.setOutput(n, reduceExtreme(c, n, reduceOp, x, {axis}, keep, "values"), 0);
    Attrs attrs{{"axis", axis}, {"keepdims", static_cast<int64_t>(keep)}};
    c.setOutput(n, c.emit(n, isMax ? "argmax" : "argmin", {x}, attrs, "indices"), 1);
  };
}

auto amaxMin(bool isMax) {
  return [isMax](Ctx& c, N n) {
    ValueId x = c.tensor(n, 0);
    std::vector<int64_t> axes = n->inputs().size() > 1 ? c.toInts(n, 1, 1) : std::vector<int64_t>{};
    bool keep = n->inputs().size() > 2 && c.toBool(n, 2);
    c.setOutput(n, reduceExtreme(c, n, isMax ? "max" : "min", x, axes, keep));
  };
}

auto argMaxMin(bool isMax) {
  return [isMax](Ctx& c, N n) {
    ValueId x = c.tensor(n, 0);
    bool keep = n->inputs().size() > 2 && c.toBool(n, 2);
    std::string op = isMax ? "argmax" : "argmin";
    if (n->inputs().size() < 2 || c.isNone(n, 1)) {  // over the flattened tensor
      ValueId flat = reshapeTo(c, n, x, {c.type(x).numel()}, "flat");
      ValueId y = c.emit(n, op, {flat}, {{"axis", int64_t{0}}, {"keepdims", int64_t{0}}});
      return c.setOutput(n, keep ? reshapeTo(c, n, y, Shape(c.type(x).rank(), 1)) : y);
    }
    int64_t axis = normDim(n, c.toInt(n, 1), c.type(x).rank());
    c.setOutput(n, c.emit(n, op, {x}, {{"axis", axis}, {"keepdims", static_cast<int64_t>(keep)}}));
  };
}

void bindTopk(Ctx& c, N n, ValueId x, int64_t k, int64_t axis, bool largest) {
  core::Attrs attrs{{"k", k}, {"axis", axis}, {"largest", static_cast<int64_t>(largest)}};
  std::vector<ValueId> outs = c.emitAll(n, "topk", {x}, attrs);
  c.setOutput(n, outs[0], 0);
  c.setOutput(n, outs[1], 1);
}

void topk(Ctx& c, N n) {
  // topk(self, k, dim=-1, largest=True, sorted=True); unsorted results come out sorted.
  ValueId x = c.tensor(n, 0);
  int64_t axis = normDim(n, c.toInt(n, 2), c.type(x).rank());
  bindTopk(c, n, x, c.toInt(n, 1), axis, c.toBool(n, 3));
}

void sort(Ctx& c, N n) {
  // sort(self, dim=-1, descending=False) and sort.stable(self, *, stable, dim, descending).
  ValueId x = c.tensor(n, 0);
  const c10::FunctionSchema& schema = n->schema();
  int64_t dim = -1;
  bool descending = false;
  for (size_t i = 1; i < n->inputs().size() && i < schema.arguments().size(); ++i) {
    const std::string& name = schema.arguments()[i].name();
    if (name == "dim") dim = c.toInt(n, i);
    if (name == "descending") descending = c.toBool(n, i);
  }
  int64_t axis = normDim(n, dim, c.type(x).rank());
  bindTopk(c, n, x, c.type(x).rank() == 0 ? 1 : c.type(x).shape[axis], axis, descending);
}

/// log_softmax = s − log Σ exp(s) with s = x − max(x) along the axis.
void logSoftmax(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  requireFloat(c, n, x);
  if (n->inputs().size() > 2 && !c.isNone(n, 2) && n->input(2)->type()->kind() != c10::TypeKind::BoolType &&
      toKilnDType(static_cast<c10::ScalarType>(c.toInt(n, 2))) != c.type(x).dtype)
    Ctx::fail(n, "a dtype argument that casts is not supported");
  int64_t axis = normDim(n, c.toInt(n, 1), c.type(x).rank());
  ValueId m = reduceExtreme(c, n, "max", x, {axis}, true, "lsm_max");
  ValueId s = c.emit(n, "sub", {x, m}, {}, "lsm_shifted");
  ValueId e = c.emit(n, "exp", {s}, {}, "lsm_exp");
  ValueId sum = c.emit(n, "sum", {e}, {{"axes", std::vector<int64_t>{axis}}, {"keepdims", int64_t{1}}}, "lsm_sum");
  ValueId l = c.emit(n, "log", {sum}, {}, "lsm_log");
  c.setOutput(n, c.emit(n, "sub", {s, l}));
}

}  // namespace

void registerIndexingOps(Table& t) {
  reg(t, "slice", slice);
  reg(t, "select", select);
  reg(t, "narrow", narrow);
  reg(t, "chunk", chunk);
  reg(t, "split", split);
  reg(t, "split_with_sizes", split);
  reg(t, "unbind", unbind);
  reg(t, "index_select", indexSelect);
  reg(t, "embedding", embedding);
  reg(t, "index", index);
  reg(t, "expand", expand);
  reg(t, "expand_as", expandAs);
  reg(t, "broadcast_to", expand);
  reg(t, "repeat", repeat);
  reg(t, "roll", roll);
  reg(t, "where", where);
  reg(t, "masked_fill", maskedFill, true);
  for (const auto& [name, op] : std::vector<std::pair<const char*, const char*>>{
           {"eq", "equal"}, {"ne", "not_equal"}, {"lt", "less"}, {"le", "less_equal"}, {"gt", "greater"},
           {"ge", "greater_equal"}, {"greater", "greater"}, {"less", "less"}, {"greater_equal", "greater_equal"},
           {"less_equal", "less_equal"}, {"not_equal", "not_equal"}})
    reg(t, name, compare(op), true);
  reg(t, "logical_not", logicalNot, true);
  reg(t, "any", anyAll(true));
  reg(t, "all", anyAll(false));
  reg(t, "bitwise_not", logicalNot, true);
  reg(t, "logical_and", logical(true), true);
  reg(t, "logical_or", logical(false), true);
  reg(t, "__and__", logical(true));
  reg(t, "__or__", logical(false));
  reg(t, "bitwise_and", logical(true), true);
  reg(t, "bitwise_or", logical(false), true);
  reg(t, "to", toDType);
  reg(t, "type_as", toDType);
  reg(t, "max", maxMin(true));
  reg(t, "min", maxMin(false));
  reg(t, "amax", amaxMin(true));
  reg(t, "amin", amaxMin(false));
  reg(t, "argmax", argMaxMin(true));
  reg(t, "argmin", argMaxMin(false));
  reg(t, "topk", topk);
  reg(t, "sort", sort);
  reg(t, "log_softmax", logSoftmax);
  reg(t, "_log_softmax", logSoftmax);
}

}  // namespace kiln::importers::ts

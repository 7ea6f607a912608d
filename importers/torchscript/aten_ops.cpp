// The aten:: → Kiln operator table. Each handler reads its node's inputs through ImportContext
// (constants were evaluated by the walker), emits canonical Kiln operators
// (core/ir/op_registry.h) and binds the node's outputs. In-place variants ("relu_") share the
// functional handler; the walker checks that their mutation is unobservable.
#include <ATen/ATen.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <set>
#include <unordered_map>

#include "importers/torchscript/aten_helpers.h"
#include "importers/torchscript/context.h"

namespace kiln::importers::ts {
namespace {

void identity(Ctx& c, N n) { c.bind(n->output(), c.input(n, 0)); }

// --- activations -----------------------------------------------------------------------------

auto unary(const std::string& op, bool floatOnly) {
  return [op, floatOnly](Ctx& c, N n) {
    ValueId x = c.tensor(n, 0);
    if (floatOnly) requireFloat(c, n, x);
    c.setOutput(n, c.emit(n, op, {x}));
  };
}

void emitClamp(Ctx& c, N n, std::optional<double> lo, std::optional<double> hi) {
  ValueId x = c.tensor(n, 0);
  // Kiln's clamp has both bounds; a missing one becomes the largest finite float.
  c.setOutput(n, c.emit(n, "clamp", {x}, {{"min", lo.value_or(-FLT_MAX)}, {"max", hi.value_or(FLT_MAX)}}));
}

std::optional<double> optionalBound(Ctx& c, N n, size_t i) {
  if (i >= n->inputs().size() || c.isNone(n, i)) return std::nullopt;
  auto v = c.scalar(n, i);
  if (!v) Ctx::fail(n, "bound " + c.argName(n, i) + " must be a constant number");
  return v;
}

void clamp(Ctx& c, N n) {
  auto lo = optionalBound(c, n, 1), hi = optionalBound(c, n, 2);
  if (!lo && !hi) Ctx::fail(n, "at least one of 'min' and 'max' must be given", ErrorKind::InvalidModel);
  emitClamp(c, n, lo, hi);
}

void hardtanh(Ctx& c, N n) { emitClamp(c, n, c.toDouble(n, 1), c.toDouble(n, 2)); }

void leakyRelu(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  double alpha = n->inputs().size() > 1 ? c.toDouble(n, 1) : 0.01;
  c.setOutput(n, c.emit(n, "leaky_relu", {x}, {{"alpha", alpha}}));
}

void gelu(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  requireFloat(c, n, x);
  std::string approximate = n->inputs().size() > 1 ? c.toString(n, 1) : "none";
  if (approximate != "none" && approximate != "tanh")
    Ctx::fail(n, "unknown approximation '" + approximate + "'", ErrorKind::InvalidModel);
  c.setOutput(n, c.emit(n, "gelu", {x}, {{"approximate", approximate}}));
}

// --- broadcasting binary ops -----------------------------------------------------------------

}  // namespace

at::Tensor promotionProbe(Ctx& c, N n, size_t i) {
  const Item& it = c.input(n, i);
  if (it.isTensor()) {
    const core::TensorType t = c.type(it.tensor);
    auto opts = at::TensorOptions().dtype(toTorchDType(t.dtype));
    return t.rank() == 0 ? at::empty({}, opts) : at::empty({0}, opts);
  }
  if (const at::Tensor* t = c.constantTensor(n, i)) return *t;
  if (it.isConstant() && (it.constant.isInt() || it.constant.isDouble() || it.constant.isBool())) {
    at::Tensor t = at::scalar_tensor(it.constant.toScalar(), at::TensorOptions().dtype(
        it.constant.isDouble() ? at::kDouble : it.constant.isInt() ? at::kLong : at::kBool));
    t.unsafeGetTensorImpl()->set_wrapped_number(true);
    return t;
  }
  Ctx::fail(n, "operand " + c.argName(n, i) + " must be a tensor or a number");
}

ValueId operand(Ctx& c, N n, size_t i, c10::ScalarType dtype, double scale) {
  const Item& it = c.input(n, i);
  DType kdtype = toKilnDType(dtype);
  if (it.isTensor()) {
    ValueId x = it.tensor;
    if (c.type(x).dtype != kdtype)
      x = c.emit(n, "cast", {x}, {{"dtype", std::string(runtime::dtypeName(kdtype))}}, "promoted");
    if (scale == 1.0) return x;
    return c.emit(n, "mul", {x, c.scalarConstant(scale, kdtype)}, {}, "scaled");
  }
  if (const at::Tensor* t = c.constantTensor(n, i)) {
    if (t->scalar_type() == dtype && scale == 1.0) return c.tensor(n, i);
    at::Tensor converted = t->to(dtype);
    if (scale != 1.0) converted = converted * scale;
    return c.constant(converted, "const");
  }
  return c.scalarConstant(*c.scalar(n, i) * scale, kdtype);
}

namespace {

/// out = op(a * scaleA, b * scaleB) with PyTorch's type promotion.
void binary(Ctx& c, N n, const std::string& op, size_t a, size_t b, double scaleA = 1.0, double scaleB = 1.0) {
  c10::ScalarType dtype = at::result_type(promotionProbe(c, n, a), promotionProbe(c, n, b));
  if (op == "div" && !c10::isFloatingType(dtype)) dtype = c10::ScalarType::Float;  // true division
  ValueId x = operand(c, n, a, dtype, scaleA), y = operand(c, n, b, dtype, scaleB);
  c.setOutput(n, c.emit(n, op, {x, y}));
}

double alphaOf(Ctx& c, N n, size_t i) { return i < n->inputs().size() ? c.toDouble(n, i) : 1.0; }

void add(Ctx& c, N n) { binary(c, n, "add", 0, 1, 1.0, alphaOf(c, n, 2)); }
void sub(Ctx& c, N n) { binary(c, n, "sub", 0, 1, 1.0, alphaOf(c, n, 2)); }
void rsub(Ctx& c, N n) { binary(c, n, "sub", 1, 0, 1.0, alphaOf(c, n, 2)); }
void mul(Ctx& c, N n) { binary(c, n, "mul", 0, 1); }
void div(Ctx& c, N n) {
  if (n->inputs().size() > 2 && !c.isNone(n, 2))
    Ctx::fail(n, "rounding_mode '" + c.toString(n, 2) + "' is not supported");
  binary(c, n, "div", 0, 1);
}
auto binaryOp(const std::string& op) {
  return [op](Ctx& c, N n) { binary(c, n, op, 0, 1); };
}

// --- convolution, normalization, dense -------------------------------------------------------

struct ConvArgs {
  size_t bias = 2, stride = 3, padding = 4, dilation = 5, groups = 6;
};

std::vector<int64_t> spatial(Ctx& c, N n, size_t i, size_t rank) {
  std::vector<int64_t> v = c.toInts(n, i, rank);
  if (v.size() == 1 && rank > 1) v.assign(rank, v[0]);
  if (v.size() != rank) Ctx::fail(n, "argument " + c.argName(n, i) + " must have " + std::to_string(rank) + " values");
  return v;
}

void conv(Ctx& c, N n, const ConvArgs& args) {
  ValueId x = c.tensor(n, 0);
  ValueId w = c.tensor(n, 1);
  int64_t rank = c.type(w).rank();
  if (rank != 3 && rank != 4)
    Ctx::fail(n, std::to_string(rank - 2) + "-D convolution is not supported (only 1-D and 2-D)");
  size_t dims = static_cast<size_t>(rank - 2);
  std::vector<int64_t> stride = spatial(c, n, args.stride, dims), dilation = spatial(c, n, args.dilation, dims);
  std::vector<int64_t> padding;
  const Item& pad = c.input(n, args.padding);
  if (pad.isConstant() && pad.constant.isString()) {
    // PyTorch's padding='same' (stride 1 only): dilation·(k − 1) in total per axis, half on each
    // side and the odd one on the right/bottom, as a pad node before the convolution.
    const std::string& mode = pad.constant.toStringRef();
    if (mode != "same" && mode != "valid")
      Ctx::fail(n, "padding='" + mode + "' is not one of 'same', 'valid'", ErrorKind::InvalidModel);
    const Shape ws = c.type(w).shape;
    std::vector<int64_t> extra;  // PyTorch's pad list: [before, after] from the last axis back
    for (size_t d = 0; d < dims; ++d) {
      int64_t total = mode == "same" ? dilation[d] * (ws[2 + d] - 1) : 0;
      if (mode == "same" && stride[d] != 1)
        Ctx::fail(n, "padding='same' is not supported for strided convolutions", ErrorKind::InvalidModel);
      padding.push_back(total / 2);
      extra.insert(extra.begin(), {0, total - 2 * (total / 2)});
    }
    x = emitTorchPad(c, n, x, extra, "constant", 0.0, "same_pad");
  } else {
    padding = spatial(c, n, args.padding, dims);
  }
  Attrs attrs{{"groups", c.toInt(n, args.groups)}};
  std::vector<ValueId> inputs{x, w};
  if (!c.isNone(n, args.bias)) inputs.push_back(c.tensor(n, args.bias));
  if (dims == 2) {
    attrs.set("stride", stride);
    attrs.set("padding", padding);
    attrs.set("dilation", dilation);
    c.setOutput(n, c.emit(n, "conv2d", inputs, attrs));
    return;
  }
  // 1-D as 2-D over [N, C, 1, L].
  const Shape xs = c.type(x).shape, ws = c.type(w).shape;
  if (xs.size() != 3) Ctx::fail(n, "1-D convolution expects a [N, C, L] input, got " + c.type(x).str());
  inputs[0] = reshapeTo(c, n, x, {xs[0], xs[1], 1, xs[2]}, "conv_in");
  inputs[1] = reshapeTo(c, n, w, {ws[0], ws[1], 1, ws[2]}, "conv_weight");
  attrs.set("stride", std::vector<int64_t>{1, stride[0]});
  attrs.set("padding", std::vector<int64_t>{0, padding[0]});
  attrs.set("dilation", std::vector<int64_t>{1, dilation[0]});
  ValueId y = c.emit(n, "conv2d", inputs, attrs, "conv");
  const Shape ys = c.type(y).shape;
  c.setOutput(n, reshapeTo(c, n, y, {ys[0], ys[1], ys[3]}));
}

void convolution(Ctx& c, N n) {
  // aten::_convolution / aten::convolution: input, weight, bias, stride, padding, dilation,
  // transposed, output_padding, groups, ...
  if (c.toBool(n, 6)) return convolutionTransposed(c, n);
  conv(c, n, ConvArgs{2, 3, 4, 5, 8});
}

void convNd(Ctx& c, N n) { conv(c, n, ConvArgs{2, 3, 4, 5, 6}); }

void batchNorm(Ctx& c, N n) {
  // input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled
  if (c.isNone(n, 3) || c.isNone(n, 4))
    Ctx::fail(n, "batch_norm without running statistics (batch statistics) is not supported");
  if (c.toBool(n, 5)) Ctx::fail(n, "batch_norm in training mode is not supported (call model.eval() before tracing)");
  ValueId x = c.tensor(n, 0);
  requireFloat(c, n, x);
  const core::TensorType xt = c.type(x);
  if (xt.rank() < 2) Ctx::fail(n, "batch_norm input must have rank >= 2, got " + xt.str(), ErrorKind::InvalidModel);
  auto opts = at::TensorOptions().dtype(toTorchDType(xt.dtype));
  ValueId gamma = c.isNone(n, 1) ? c.constant(at::ones({xt.shape[1]}, opts), "bn_gamma") : c.tensor(n, 1);
  ValueId beta = c.isNone(n, 2) ? c.constant(at::zeros({xt.shape[1]}, opts), "bn_beta") : c.tensor(n, 2);
  ValueId mean = c.tensor(n, 3), var = c.tensor(n, 4);
  c.setOutput(n, c.emit(n, "batch_norm", {x, gamma, beta, mean, var}, {{"epsilon", c.toDouble(n, 7)}}));
}

/// layer_norm(input, normalized_shape, weight?, bias?, eps, cudnn_enable).
void layerNorm(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  requireFloat(c, n, x);
  const core::TensorType xt = c.type(x);
  std::vector<int64_t> normalized = c.toInts(n, 1, 1);
  auto k = static_cast<int64_t>(normalized.size());
  if (k == 0 || k > xt.rank() ||
      !std::equal(normalized.begin(), normalized.end(), xt.shape.end() - k))
    Ctx::fail(n, "normalized_shape " + runtime::shapeString(normalized) + " does not match the trailing dimensions of " +
                     xt.str(), ErrorKind::InvalidModel);
  std::optional<ValueId> weight, bias;
  if (!c.isNone(n, 2)) weight = c.tensor(n, 2);
  if (!c.isNone(n, 3)) bias = c.tensor(n, 3);
  c.setOutput(n, emitLayerNorm(c, n, x, k, weight, bias, c.toDouble(n, 4)));
}

void linear(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0), w = c.tensor(n, 1);
  requireFloat(c, n, x);
  std::vector<ValueId> inputs{x, w};
  if (n->inputs().size() > 2 && !c.isNone(n, 2)) inputs.push_back(c.tensor(n, 2));
  c.setOutput(n, c.emit(n, "dense", inputs));
}

void matmul(Ctx& c, N n) {
  ValueId a = c.tensor(n, 0), b = c.tensor(n, 1);
  requireFloat(c, n, a);
  c.setOutput(n, c.emit(n, "matmul", {a, b}));
}

void bmm(Ctx& c, N n) {
  ValueId a = c.tensor(n, 0), b = c.tensor(n, 1);
  if (c.type(a).rank() != 3 || c.type(b).rank() != 3)
    Ctx::fail(n, "expects rank-3 operands, got " + c.type(a).str() + " and " + c.type(b).str(), ErrorKind::InvalidModel);
  matmul(c, n);
}

void addmm(Ctx& c, N n) {
  // out = beta * bias + alpha * (m1 @ m2)
  double beta = n->inputs().size() > 3 ? c.toDouble(n, 3) : 1.0;
  double alpha = n->inputs().size() > 4 ? c.toDouble(n, 4) : 1.0;
  ValueId m1 = c.tensor(n, 1);
  requireFloat(c, n, m1);
  const at::Tensor* m2 = c.constantTensor(n, 2);
  const Item& bias = c.input(n, 0);
  bool biasIsVector = (bias.isTensor() && c.type(bias.tensor).rank() == 1) ||
                      (c.constantTensor(n, 0) && c.constantTensor(n, 0)->dim() == 1);
  if (m2 && m2->dim() == 2 && alpha == 1.0 && beta == 1.0 && biasIsVector) {
    ValueId w = c.constant(m2->t().contiguous(), "addmm_weight");
    c.setOutput(n, c.emit(n, "dense", {m1, w, c.tensor(n, 0)}));
    return;
  }
  ValueId y = c.emit(n, "matmul", {m1, c.tensor(n, 2)}, {}, "mm");
  DType dtype = c.type(y).dtype;
  if (alpha != 1.0) y = c.emit(n, "mul", {y, c.scalarConstant(alpha, dtype)}, {}, "mm_scaled");
  if (beta == 0.0) {
    c.setOutput(n, y);
    return;
  }
  ValueId b = c.tensor(n, 0);
  if (beta != 1.0) b = c.emit(n, "mul", {b, c.scalarConstant(beta, dtype)}, {}, "bias_scaled");
  c.setOutput(n, c.emit(n, "add", {y, b}));
}

// --- shape ops -------------------------------------------------------------------------------

void emitReshape(Ctx& c, N n, ValueId x, Shape shape) { c.setOutput(n, reshapeTo(c, n, x, shape)); }

void reshape(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  Shape shape = c.toInts(n, 1);
  int64_t known = 1, inferAt = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && inferAt < 0) inferAt = static_cast<int64_t>(i);
    else known *= shape[i];
  }
  int64_t numel = c.type(x).numel();
  if (inferAt >= 0) {
    if (known <= 0 || numel % known != 0)
      Ctx::fail(n, "cannot reshape " + c.type(x).str() + " to " + runtime::shapeString(shape), ErrorKind::InvalidModel);
    shape[inferAt] = numel / known;
  }
  if (runtime::numElements(shape) != numel)
    Ctx::fail(n, "cannot reshape " + c.type(x).str() + " to " + runtime::shapeString(shape), ErrorKind::InvalidModel);
  emitReshape(c, n, x, shape);
}

void reshapeAs(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  emitReshape(c, n, x, c.type(c.tensor(n, 1)).shape);
}

void flatten(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  const Shape s = c.type(x).shape;
  if (s.empty()) return emitReshape(c, n, x, {1});
  auto rank = static_cast<int64_t>(s.size());
  int64_t start = normDim(n, c.toInt(n, 1), rank), end = normDim(n, c.toInt(n, 2), rank);
  if (start > end) Ctx::fail(n, "start_dim after end_dim", ErrorKind::InvalidModel);
  Shape out(s.begin(), s.begin() + start);
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d) merged *= s[d];
  out.push_back(merged);
  out.insert(out.end(), s.begin() + end + 1, s.end());
  emitReshape(c, n, x, out);
}

void squeeze(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  const Shape s = c.type(x).shape;
  auto rank = static_cast<int64_t>(s.size());
  std::vector<bool> drop(s.size(), false);
  if (n->inputs().size() == 1) {
    for (size_t d = 0; d < s.size(); ++d) drop[d] = s[d] == 1;
  } else {
    for (int64_t d : c.toInts(n, 1, 1)) {
      if (rank == 0) break;
      int64_t a = normDim(n, d, rank);
      drop[a] = s[a] == 1;
    }
  }
  Shape out;
  for (size_t d = 0; d < s.size(); ++d) {
    if (!drop[d]) out.push_back(s[d]);
  }
  emitReshape(c, n, x, out);
}

void unsqueeze(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  Shape s = c.type(x).shape;
  int64_t d = normDim(n, c.toInt(n, 1), static_cast<int64_t>(s.size()) + 1);
  s.insert(s.begin() + d, 1);
  emitReshape(c, n, x, s);
}

void emitTranspose(Ctx& c, N n, ValueId x, const std::vector<int64_t>& perm) {
  bool trivial = true;
  for (size_t i = 0; i < perm.size(); ++i) trivial = trivial && perm[i] == static_cast<int64_t>(i);
  c.setOutput(n, trivial ? x : c.emit(n, "transpose", {x}, {{"perm", perm}}));
}

void permute(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  int64_t rank = c.type(x).rank();
  std::vector<int64_t> perm = c.toInts(n, 1);
  if (static_cast<int64_t>(perm.size()) != rank)
    Ctx::fail(n, "permutation does not match rank of " + c.type(x).str(), ErrorKind::InvalidModel);
  for (int64_t& p : perm) p = normDim(n, p, rank);
  emitTranspose(c, n, x, perm);
}

void transpose(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  int64_t rank = c.type(x).rank();
  if (rank == 0) return c.setOutput(n, x);
  std::vector<int64_t> perm(rank);
  for (int64_t i = 0; i < rank; ++i) perm[i] = i;
  std::swap(perm[normDim(n, c.toInt(n, 1), rank)], perm[normDim(n, c.toInt(n, 2), rank)]);
  emitTranspose(c, n, x, perm);
}

void transpose2d(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  if (c.type(x).rank() < 2) return c.setOutput(n, x);
  if (c.type(x).rank() > 2) Ctx::fail(n, "expects a tensor of rank <= 2, got " + c.type(x).str(), ErrorKind::InvalidModel);
  emitTranspose(c, n, x, {1, 0});
}

void cat(Ctx& c, N n) {
  std::vector<ValueId> xs = c.tensors(n, 0);
  if (xs.empty()) Ctx::fail(n, "expects a non-empty list of tensors", ErrorKind::InvalidModel);
  int64_t axis = normDim(n, n->inputs().size() > 1 ? c.toInt(n, 1) : 0, c.type(xs[0]).rank());
  if (xs.size() == 1) return c.setOutput(n, xs[0]);
  c.setOutput(n, c.emit(n, "concat", xs, {{"axis", axis}}));
}

void stack(Ctx& c, N n) {
  std::vector<ValueId> xs = c.tensors(n, 0);
  if (xs.empty()) Ctx::fail(n, "expects a non-empty list of tensors", ErrorKind::InvalidModel);
  int64_t axis = normDim(n, n->inputs().size() > 1 ? c.toInt(n, 1) : 0, c.type(xs[0]).rank() + 1);
  for (ValueId& x : xs) {
    Shape s = c.type(x).shape;
    s.insert(s.begin() + axis, 1);
    x = reshapeTo(c, n, x, s, "stack_in");
  }
  if (xs.size() == 1) return c.setOutput(n, xs[0]);
  c.setOutput(n, c.emit(n, "concat", xs, {{"axis", axis}}));
}

void dropout(Ctx& c, N n) {
  if (n->inputs().size() > 2 && c.toBool(n, 2))
    Ctx::fail(n, "dropout in training mode is not supported (call model.eval() before tracing)");
  identity(c, n);
}

/// zeros_like/ones_like(self, dtype?, ...) and full_like(self, fill_value, dtype?, ...): a constant
/// of self's shape (the values do not depend on self's).
void likeConstant(Ctx& c, N n, double fill, size_t dtypeArg = 1) {
  ValueId x = c.tensor(n, 0);
  const core::TensorType t = c.type(x);
  c10::ScalarType dtype = toTorchDType(t.dtype);
  if (n->inputs().size() > dtypeArg && !c.isNone(n, dtypeArg)) dtype = static_cast<c10::ScalarType>(c.toInt(n, dtypeArg));
  c.bind(n->output(), Item::ofConstant(at::full(t.shape, fill, at::TensorOptions().dtype(dtype))));
}

// --- pooling, reductions, softmax ------------------------------------------------------------

/// Runs `body` on a rank-4 view of a rank-3 (unbatched) input.
template <typename Body>
void pool4d(Ctx& c, N n, Body body) {
  ValueId x = c.tensor(n, 0);
  const Shape s = c.type(x).shape;
  if (s.size() != 3 && s.size() != 4) Ctx::fail(n, "expects a rank-3 or rank-4 input, got " + c.type(x).str());
  if (s.size() == 4) return c.setOutput(n, body(x));
  ValueId y = body(reshapeTo(c, n, x, {1, s[0], s[1], s[2]}, "pool_in"));
  const Shape ys = c.type(y).shape;
  c.setOutput(n, reshapeTo(c, n, y, {ys[1], ys[2], ys[3]}));
}

void maxPool2d(Ctx& c, N n) {
  // input, kernel_size, stride, padding, dilation, ceil_mode
  std::vector<int64_t> kernel = spatial(c, n, 1, 2);
  std::vector<int64_t> stride = c.toInts(n, 2, 2);
  stride = stride.empty() ? kernel : spatial(c, n, 2, 2);
  Attrs attrs{{"kernel", kernel}, {"stride", stride}, {"padding", spatial(c, n, 3, 2)},
              {"dilation", spatial(c, n, 4, 2)}, {"ceil_mode", static_cast<int64_t>(c.toBool(n, 5))}};
  pool4d(c, n, [&](ValueId x) { return c.emit(n, "max_pool2d", {x}, attrs); });
}

void avgPool2d(Ctx& c, N n) {
  // input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
  if (n->inputs().size() > 6 && !c.isNone(n, 6)) Ctx::fail(n, "divisor_override is not supported");
  std::vector<int64_t> kernel = spatial(c, n, 1, 2);
  std::vector<int64_t> stride = c.toInts(n, 2, 2);
  stride = stride.empty() ? kernel : spatial(c, n, 2, 2);
  Attrs attrs{{"kernel", kernel}, {"stride", stride}, {"padding", spatial(c, n, 3, 2)},
              {"dilation", std::vector<int64_t>{1, 1}}, {"ceil_mode", static_cast<int64_t>(c.toBool(n, 4))},
              {"count_include_pad", static_cast<int64_t>(c.toBool(n, 5))}};
  pool4d(c, n, [&](ValueId x) { return c.emit(n, "avg_pool2d", {x}, attrs); });
}

void adaptiveAvgPool2d(Ctx& c, N n) {
  ValueId x0 = c.tensor(n, 0);
  const Shape s = c.type(x0).shape;
  const Item& arg = c.input(n, 1);
  std::vector<std::optional<int64_t>> size;
  if (arg.isConstant() && arg.constant.isInt()) size.assign(2, arg.constant.toInt());
  else if (arg.isConstant() && arg.constant.isList()) {
    for (const c10::IValue& e : arg.constant.toListRef()) {
      if (e.isNone()) size.emplace_back();
      else if (e.isInt()) size.emplace_back(e.toInt());
      else Ctx::fail(n, "output_size must be constant integers");
    }
  } else {
    Ctx::fail(n, "output_size must be constant integers");
  }
  if (size.size() == 1) size.push_back(size[0]);
  if (size.size() != 2 || s.size() < 3) Ctx::fail(n, "expects a 2-D output_size and a rank-3 or rank-4 input");
  std::vector<int64_t> out{size[0].value_or(s[s.size() - 2]), size[1].value_or(s[s.size() - 1])};
  pool4d(c, n, [&](ValueId x) { return c.emit(n, "adaptive_avg_pool2d", {x}, {{"output_size", out}}); });
}

/// mean/sum: (self, dim?, keepdim, dtype) or (self, dtype).
auto reduce(const std::string& op) {
  return [op](Ctx& c, N n) {
    ValueId x = c.tensor(n, 0);
    if (op == "mean") requireFloat(c, n, x);
    int64_t rank = c.type(x).rank();
    size_t nIn = n->inputs().size();
    size_t dtypeArg = nIn == 2 ? 1 : 3;
    if (dtypeArg < nIn && !c.isNone(n, dtypeArg) &&
        toKilnDType(static_cast<c10::ScalarType>(c.toInt(n, dtypeArg))) != c.type(x).dtype)
      Ctx::fail(n, "a dtype argument that casts is not supported");
    std::vector<int64_t> axes;
    bool keep = false;
    if (nIn > 2) {
      if (!c.isNone(n, 1)) axes = c.toInts(n, 1, 1);
      keep = c.toBool(n, 2);
    }
    if (axes.empty()) {
      for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
    }
    for (int64_t& a : axes) a = normDim(n, a, rank);
    if (!isFloat(c.type(x).dtype) && c.type(x).dtype != DType::Int64)
      Ctx::fail(n, "reducing " + c.type(x).str() + " would need a cast, which is not supported");
    c.setOutput(n, c.emit(n, op, {x}, {{"axes", axes}, {"keepdims", static_cast<int64_t>(keep)}}));
  };
}

void softmax(Ctx& c, N n) {
  // softmax(self, dim, dtype) or _softmax(self, dim, half_to_float)
  ValueId x = c.tensor(n, 0);
  requireFloat(c, n, x);
  if (n->kind() == c10::aten::softmax && n->inputs().size() > 2 && !c.isNone(n, 2) &&
      toKilnDType(static_cast<c10::ScalarType>(c.toInt(n, 2))) != c.type(x).dtype)
    Ctx::fail(n, "a dtype argument that casts is not supported");
  int64_t axis = normDim(n, c.toInt(n, 1), c.type(x).rank());
  c.setOutput(n, c.emit(n, "softmax", {x}, {{"axis", axis}}));
}

void dataDependent(Ctx& c, N n) {
  Ctx::fail(n, "reads the value of a tensor computed by the model (data-dependent), which is not supported");
}

/// aten::Bool / Int / Float / item of a one-element tensor the model computes: the number stays a
/// rank-0 tensor in the graph, which control flow (if/loop conditions, trip counts, carried
/// values) and tensor arithmetic can use; an operator that needs it at compile time (a shape, a
/// size) says so itself.
void scalarOfTensor(Ctx& c, N n) {
  if (!c.isGraphTensor(n, 0) || c.type(c.tensor(n, 0)).numel() != 1) return dataDependent(c, n);
  ValueId x = c.tensor(n, 0);
  if (c.type(x).rank() != 0) x = c.emit(n, "reshape", {x}, {{"shape", std::vector<int64_t>{}}});
  std::string kind = n->kind().toUnqualString();
  const char* dtype = kind == "Bool" ? "bool" : kind == "Int" || kind == "IntImplicit" ? "i64"
                      : kind == "Float" || kind == "FloatImplicit" ? "f32" : nullptr;
  if (dtype && runtime::dtypeName(c.type(x).dtype) != std::string_view(dtype))
    x = c.emit(n, "cast", {x}, {{"dtype", std::string(dtype)}});
  c.setOutput(n, x);
}

// --- the table -------------------------------------------------------------------------------

Table buildTable() {
  Table t;
  reg(t, "_convolution", convolution);
  reg(t, "convolution", convolution);
  reg(t, "conv2d", convNd);
  reg(t, "conv1d", convNd);
  reg(t, "_convolution_mode", convNd);  // conv1d/conv2d(padding="same"|"valid") as traced
  reg(t, "batch_norm", batchNorm);
  reg(t, "layer_norm", layerNorm);
  reg(t, "linear", linear);
  reg(t, "addmm", addmm);
  reg(t, "matmul", matmul);
  reg(t, "mm", matmul);
  reg(t, "bmm", bmm);

  reg(t, "relu", unary("relu", false), true);
  for (const char* op : {"sigmoid", "tanh", "silu", "hardswish", "hardsigmoid", "exp", "log", "sqrt", "rsqrt", "erf"})
    reg(t, op, unary(op, true), true);
  for (const char* op : {"neg", "abs"}) reg(t, op, unary(op, false), true);
  reg(t, "gelu", gelu, true);
  reg(t, "leaky_relu", leakyRelu, true);
  reg(t, "relu6", [](Ctx& c, N n) { emitClamp(c, n, 0.0, 6.0); }, true);
  reg(t, "hardtanh", hardtanh, true);
  reg(t, "clamp", clamp, true);
  reg(t, "clip", clamp, true);
  reg(t, "clamp_min", [](Ctx& c, N n) { emitClamp(c, n, c.toDouble(n, 1), std::nullopt); }, true);
  reg(t, "clamp_max", [](Ctx& c, N n) { emitClamp(c, n, std::nullopt, c.toDouble(n, 1)); }, true);

  reg(t, "add", add, true);
  reg(t, "sub", sub, true);
  reg(t, "rsub", rsub);
  reg(t, "mul", mul, true);
  reg(t, "div", div, true);
  reg(t, "true_divide", div, true);
  reg(t, "maximum", binaryOp("maximum"));
  reg(t, "minimum", binaryOp("minimum"));
  reg(t, "remainder", binaryOp("remainder"));
  reg(t, "pow", binaryOp("pow"), true);

  reg(t, "flatten", flatten);
  reg(t, "reshape", reshape);
  reg(t, "view", reshape);
  reg(t, "reshape_as", reshapeAs);
  reg(t, "view_as", reshapeAs);
  reg(t, "squeeze", squeeze, true);
  reg(t, "unsqueeze", unsqueeze, true);
  reg(t, "permute", permute);
  reg(t, "transpose", transpose, true);
  reg(t, "swapaxes", transpose, true);  // transpose's other names (torch.export keeps them)
  reg(t, "swapdims", transpose, true);
  reg(t, "t", transpose2d, true);
  reg(t, "cat", cat);
  reg(t, "concat", cat);
  reg(t, "stack", stack);
  for (const char* op : {"contiguous", "clone", "detach", "alias"}) reg(t, op, identity);
  for (const char* op : {"dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout"})
    reg(t, op, dropout, true);
  reg(t, "zeros_like", [](Ctx& c, N n) { likeConstant(c, n, 0.0); });
  reg(t, "ones_like", [](Ctx& c, N n) { likeConstant(c, n, 1.0); });
  reg(t, "full_like", [](Ctx& c, N n) {
    auto fill = c.scalar(n, 1);
    if (!fill) Ctx::fail(n, "the fill value must be a constant number");
    likeConstant(c, n, *fill, 2);
  });

  reg(t, "max_pool2d", maxPool2d);
  reg(t, "avg_pool2d", avgPool2d);
  reg(t, "adaptive_avg_pool2d", adaptiveAvgPool2d);
  reg(t, "mean", reduce("mean"));
  reg(t, "sum", reduce("sum"));
  reg(t, "softmax", softmax);
  reg(t, "_softmax", softmax);

  for (const char* op : {"Int", "Float", "Bool", "item", "ScalarImplicit", "IntImplicit", "FloatImplicit"})
    reg(t, op, scalarOfTensor);
  reg(t, "tolist", dataDependent);
  registerIndexingOps(t);
  registerModelOps(t);
  registerPaddingOps(t);
  registerRecurrentOps(t);
  registerExportOps(t);
  registerWriteOps(t);
  registerEinsumOps(t);
  registerQuantizedOps(t);
  return t;
}

}  // namespace

ValueId emitLayerNorm(Ctx& c, N n, ValueId x, int64_t dims, std::optional<ValueId> weight, std::optional<ValueId> bias,
                      double eps) {
  const core::TensorType xt = c.type(x);
  std::vector<int64_t> axes;
  for (int64_t d = xt.rank() - dims; d < xt.rank(); ++d) axes.push_back(d);
  Attrs reduce{{"axes", axes}, {"keepdims", int64_t{1}}};
  ValueId mean = c.emit(n, "mean", {x}, reduce, "ln_mean");
  ValueId centered = c.emit(n, "sub", {x, mean}, {}, "ln_centered");
  ValueId squared = c.emit(n, "mul", {centered, centered}, {}, "ln_squared");
  ValueId var = c.emit(n, "mean", {squared}, reduce, "ln_var");
  ValueId shifted = c.emit(n, "add", {var, c.scalarConstant(eps, xt.dtype)}, {}, "ln_var_eps");
  ValueId rstd = c.emit(n, "rsqrt", {shifted}, {}, "ln_rstd");
  ValueId y = c.emit(n, "mul", {centered, rstd}, {}, weight || bias ? "ln_normalized" : "");
  if (weight) y = c.emit(n, "mul", {y, *weight}, {}, bias ? "ln_scaled" : "");
  if (bias) y = c.emit(n, "add", {y, *bias});
  return y;
}

void reg(Table& t, const std::string& name, OpHandler handler, bool inplace) {
  if (inplace) t.emplace("aten::" + name + "_", handler);
  t.emplace("aten::" + name, std::move(handler));
}

const Table& table() {
  static const Table* t = new Table(buildTable());
  return *t;
}

const OpHandler* findOpHandler(const std::string& kind) {
  auto it = table().find(kind);
  return it == table().end() ? nullptr : &it->second;
}

std::vector<std::string> handledKinds() {
  // Scalar conversions are folded when their input is constant, and kept as rank-0 tensors
  // (for control flow) when it is computed: not operators of their own in a model's listing.
  static const std::set<std::string> foldOnly = {"aten::Int",          "aten::Float",        "aten::Bool",
                                                 "aten::item",         "aten::ScalarImplicit", "aten::IntImplicit",
                                                 "aten::FloatImplicit", "aten::tolist"};
  std::vector<std::string> kinds;
  for (const auto& [kind, handler] : table()) {
    if (!foldOnly.count(kind)) kinds.push_back(kind);
  }
  std::sort(kinds.begin(), kinds.end());
  return kinds;
}

}  // namespace kiln::importers::ts

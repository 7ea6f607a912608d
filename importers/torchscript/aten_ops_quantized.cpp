// PyTorch quantized operators → Kiln's quantized dialect (qnn.*, core/ir/op_registry.h).
//
// Post-training-quantized and QAT models converted with torch.ao.quantization carry quint8
// activations (one scale and zero point per tensor) and qint8 weights (per-tensor or per-channel
// symmetric) prepacked into `Conv2dPackedParamsBase` / `LinearPackedParamsBase` objects. Frozen,
// those are constants; the handlers unpack them with libtorch's own `quantized::*_unpack` ops and
// emit integer weights plus the per-channel requantization (multiplier ≈ s_x·s_w[o] / s_y, offset
// ≈ bias[o] / (s_x·s_w[o]), see requantConstants) as constants. A quantized tensor becomes a u8 Kiln value; its scale and zero
// point follow from its producer (core/passes/qnn_params.h).
//
// Element-moving aten ops (max_pool2d, flatten, reshape) run on u8 values unchanged. Ops that
// compute new values on quantized tensors (adaptive/average pooling, relu, hardtanh, cat) become
// dequantize → f32 op → quantize with PyTorch's output parameters.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <cfloat>
#include <cmath>

#include "core/passes/qnn_params.h"
#include "importers/torchscript/aten_helpers.h"
#include "importers/torchscript/context.h"

namespace kiln::importers::ts {
namespace {

using core::passes::QuantParams;

/// The quantization parameters of quantized input i.
QuantParams inputParams(Ctx& c, N n, size_t i) {
  ValueId x = c.tensor(n, i);
  if (c.type(x).dtype != DType::UInt8)
    Ctx::fail(n, "input " + c.argName(n, i) + " of type " + c.type(x).str() + " is not a quint8 tensor");
  auto params = core::passes::quantParamsOf(c.graph(), x);
  if (!params) Ctx::fail(n, "the quantization parameters of input " + c.argName(n, i) + " are unknown");
  return *params;
}

/// Calls a libtorch operator (boxed) on `args` and returns its results.
jit::Stack callTorchOp(const char* name, jit::Stack args) {
  auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  handle.callBoxed(&args);
  return args;
}

const c10::IValue& packedParams(Ctx& c, N n, size_t i) {
  const Item& it = c.input(n, i);
  if (!it.isConstant() || !it.constant.isObject())
    Ctx::fail(n, "packed weights " + c.argName(n, i) + " must be a constant of the frozen module");
  return it.constant;
}

/// A quantized weight as i8 data plus one scale per output channel (axis 0).
struct QuantWeight {
  at::Tensor data;             // int8, contiguous
  std::vector<double> scales;  // one per output channel
};

QuantWeight unpackWeight(N n, const at::Tensor& w) {
  if (w.scalar_type() != c10::ScalarType::QInt8) Ctx::fail(n, "weights of type " + std::string(c10::toString(w.scalar_type())) + " are not supported (qint8 expected)");
  int64_t out = w.size(0);
  QuantWeight q{w.int_repr().contiguous(), {}};
  switch (w.qscheme()) {
    case c10::kPerTensorAffine:
    case c10::kPerTensorSymmetric:
      if (w.q_zero_point() != 0) Ctx::fail(n, "weights with a non-zero zero point are not supported");
      q.scales.assign(out, w.q_scale());
      break;
    case c10::kPerChannelAffine:
    case c10::kPerChannelSymmetric:
    case c10::kPerChannelAffineFloatQParams: {
      if (w.q_per_channel_axis() != 0) Ctx::fail(n, "per-channel weight scales along an axis other than 0");
      at::Tensor zp = w.q_per_channel_zero_points();
      if (zp.ne(0).any().item<bool>()) Ctx::fail(n, "weights with non-zero zero points are not supported");
      at::Tensor s = w.q_per_channel_scales().to(at::kDouble).contiguous();
      q.scales.assign(s.data_ptr<double>(), s.data_ptr<double>() + out);
      break;
    }
    default: Ctx::fail(n, "weight quantization scheme " + std::string(c10::toString(w.qscheme())) + " is not supported");
  }
  return q;
}

/// The requantization of y = (acc + offset[o])·multiplier[o] + z_y as PyTorch's oneDNN kernels
/// compute it, in f32 with reciprocal scales: multiplier = (1/s_y) / ((1/s_x)·(1/s_w[o])) and the
/// bias moved into the accumulator's units, offset = bias[o]·((1/s_x)·(1/s_w[o])). (Bit-exact
/// with libtorch on the sample networks; exact rationals would differ in rare ties, and random
/// networks amplify every flipped rounding.)
std::pair<ValueId, ValueId> requantConstants(Ctx& c, const QuantWeight& w, const std::optional<at::Tensor>& bias,
                                             double inScale, double outScale) {
  auto count = static_cast<int64_t>(w.scales.size());
  at::Tensor mult = at::empty({count}, at::kFloat), offset = at::zeros({count}, at::kFloat);
  at::Tensor b = bias ? bias->to(at::kFloat).contiguous() : at::zeros({count}, at::kFloat);
  const float invX = 1.0f / static_cast<float>(inScale), invY = 1.0f / static_cast<float>(outScale);
  for (int64_t o = 0; o < count; ++o) {
    const float accScale = invX * (1.0f / static_cast<float>(w.scales[o]));
    mult.data_ptr<float>()[o] = invY / accScale;
    offset.data_ptr<float>()[o] = b.data_ptr<float>()[o] * accScale;
  }
  return {c.constant(mult, "requant_multiplier"), c.constant(offset, "requant_offset")};
}

std::optional<at::Tensor> optionalTensor(const c10::IValue& v) {
  if (v.isNone()) return std::nullopt;
  return v.toTensor();
}

Attrs outputAttrs(Ctx& c, N n, size_t scaleArg, const QuantParams& in, bool relu) {
  return Attrs{{"input_scale", in.scale},
               {"input_zero_point", in.zeroPoint},
               {"output_scale", c.toDouble(n, scaleArg)},
               {"output_zero_point", c.toInt(n, scaleArg + 1)},
               {"relu", int64_t{relu ? 1 : 0}}};
}

// quantized::conv2d(Tensor qx, Conv2dPackedParamsBase packed_weight, float output_scale,
//                   int output_zero_point)
void conv2d(Ctx& c, N n, bool relu) {
  const c10::IValue& packed = packedParams(c, n, 1);
  bool transposed = false;
  try {
    transposed = callTorchOp("quantized::conv2d_transpose", {packed})[0].toInt() != 0;
  } catch (const c10::Error&) {  // older libtorch: no such query, no transposed packing either
  }
  if (transposed) Ctx::notSupported(n, "transposed quantized convolution");
  QuantParams in = inputParams(c, n, 0);
  jit::Stack unpacked = callTorchOp("quantized::conv2d_unpack", {packed});
  QuantWeight w = unpackWeight(n, unpacked[0].toTensor());
  Attrs attrs = outputAttrs(c, n, 2, in, relu);
  attrs.set("stride", callTorchOp("quantized::conv2d_stride", {packed})[0].toIntVector());
  attrs.set("padding", callTorchOp("quantized::conv2d_padding", {packed})[0].toIntVector());
  attrs.set("dilation", callTorchOp("quantized::conv2d_dilation", {packed})[0].toIntVector());
  attrs.set("groups", callTorchOp("quantized::conv2d_groups", {packed})[0].toInt());
  auto [mult, offset] = requantConstants(c, w, optionalTensor(unpacked[1]), in.scale, attrs.getFloat("output_scale"));
  ValueId weight = c.constant(w.data, "qweight");
  c.setOutput(n, c.emit(n, "qnn.conv2d", {c.tensor(n, 0), weight, mult, offset}, attrs));
}

// quantized::linear(Tensor X, LinearPackedParamsBase W_prepack, float Y_scale_i, int Y_zero_point_i)
void linear(Ctx& c, N n, bool relu) {
  const c10::IValue& packed = packedParams(c, n, 1);
  QuantParams in = inputParams(c, n, 0);
  jit::Stack unpacked = callTorchOp("quantized::linear_unpack", {packed});
  QuantWeight w = unpackWeight(n, unpacked[0].toTensor());
  Attrs attrs = outputAttrs(c, n, 2, in, relu);
  auto [mult, offset] = requantConstants(c, w, optionalTensor(unpacked[1]), in.scale, attrs.getFloat("output_scale"));
  ValueId weight = c.constant(w.data, "qweight");
  c.setOutput(n, c.emit(n, "qnn.dense", {c.tensor(n, 0), weight, mult, offset}, attrs));
}

// quantized::add(Tensor qa, Tensor qb, float scale, int zero_point)
void add(Ctx& c, N n, bool relu) {
  QuantParams a = inputParams(c, n, 0), b = inputParams(c, n, 1);
  Attrs attrs{{"a_scale", a.scale},
              {"a_zero_point", a.zeroPoint},
              {"b_scale", b.scale},
              {"b_zero_point", b.zeroPoint},
              {"output_scale", c.toDouble(n, 2)},
              {"output_zero_point", c.toInt(n, 3)},
              {"relu", int64_t{relu ? 1 : 0}}};
  c.setOutput(n, c.emit(n, "qnn.add", {c.tensor(n, 0), c.tensor(n, 1)}, attrs));
}

ValueId dequantize(Ctx& c, N n, ValueId x, const QuantParams& p) {
  return c.emit(n, "qnn.dequantize", {x}, {{"scale", p.scale}, {"zero_point", p.zeroPoint}}, "dequantized");
}

ValueId quantize(Ctx& c, N n, ValueId x, const QuantParams& p, const std::string& stem = {}) {
  return c.emit(n, "qnn.quantize", {x}, {{"output_scale", p.scale}, {"output_zero_point", p.zeroPoint}}, stem);
}

// aten::quantize_per_tensor(Tensor self, float scale, int zero_point, ScalarType dtype)
void quantizePerTensor(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  if (c.type(x).dtype != DType::Float32) Ctx::fail(n, "input of type " + c.type(x).str() + " is not f32");
  auto dtype = static_cast<c10::ScalarType>(c.toInt(n, 3));
  if (dtype != c10::ScalarType::QUInt8)
    Ctx::notSupported(n, "quantizing to " + std::string(c10::toString(dtype)) + " (only quint8 activations)");
  c.setOutput(n, quantize(c, n, x, QuantParams{c.toDouble(n, 1), c.toInt(n, 2)}));
}

// quantized::cat(Tensor[] qx, int dim, float? scale, int? zero_point)
void cat(Ctx& c, N n, bool relu) {
  std::vector<ValueId> parts;
  for (ValueId x : c.tensors(n, 0)) {
    auto p = core::passes::quantParamsOf(c.graph(), x);
    if (!p) Ctx::fail(n, "an input's quantization parameters are unknown");
    parts.push_back(dequantize(c, n, x, *p));
  }
  int64_t axis = normDim(n, c.toInt(n, 1), c.type(parts[0]).rank());
  if (c.isNone(n, 2) || c.isNone(n, 3)) Ctx::notSupported(n, "without an output scale and zero point");
  ValueId y = c.emit(n, "concat", parts, {{"axis", axis}}, "cat");
  if (relu) y = c.emit(n, "relu", {y});
  c.setOutput(n, quantize(c, n, y, QuantParams{c.toDouble(n, 2), c.toInt(n, 3)}));
}

/// Wraps the handler of an aten op so that a quint8 input runs `onQuantized` instead.
void wrapQuantized(Table& t, const std::string& kind, void (*onQuantized)(Ctx&, N, const QuantParams&)) {
  auto it = t.find(kind);
  OpHandler plain = it == t.end() ? OpHandler() : it->second;
  t[kind] = [plain, onQuantized](Ctx& c, N n) {
    if (c.isGraphTensor(n, 0) && c.type(c.input(n, 0).tensor).dtype == DType::UInt8) {
      auto p = core::passes::quantParamsOf(c.graph(), c.input(n, 0).tensor);
      if (p) return onQuantized(c, n, *p);
    }
    if (!plain) Ctx::notSupported(n);
    plain(c, n);
  };
}

void adaptiveAvgPoolQuantized(Ctx& c, N n, const QuantParams& p) {
  ValueId x = dequantize(c, n, c.tensor(n, 0), p);
  std::vector<int64_t> size = c.toInts(n, 1, 2);
  ValueId y = c.emit(n, "adaptive_avg_pool2d", {x}, {{"output_size", size}}, "pooled");
  c.setOutput(n, quantize(c, n, y, p));
}

void reluQuantized(Ctx& c, N n, const QuantParams& p) {
  ValueId y = c.emit(n, "relu", {dequantize(c, n, c.tensor(n, 0), p)}, {}, "relu");
  c.setOutput(n, quantize(c, n, y, p));
}

void hardtanhQuantized(Ctx& c, N n, const QuantParams& p) {
  double lo = n->inputs().size() > 1 ? c.toDouble(n, 1) : -1.0, hi = n->inputs().size() > 2 ? c.toDouble(n, 2) : 1.0;
  ValueId y = c.emit(n, "clamp", {dequantize(c, n, c.tensor(n, 0), p)}, {{"min", lo}, {"max", hi}}, "clamped");
  c.setOutput(n, quantize(c, n, y, p));
}

void relu6Quantized(Ctx& c, N n, const QuantParams& p) {
  ValueId y = c.emit(n, "clamp", {dequantize(c, n, c.tensor(n, 0), p)}, {{"min", 0.0}, {"max", 6.0}}, "clamped");
  c.setOutput(n, quantize(c, n, y, p));
}

}  // namespace

void registerQuantizedOps(Table& t) {
  reg(t, "quantize_per_tensor", quantizePerTensor);
  t["aten::dequantize"] = [](Ctx& c, N n) {
    ValueId x = c.tensor(n, 0);
    if (c.type(x).dtype != DType::UInt8) return c.bind(n->output(), c.input(n, 0));  // already real
    auto p = core::passes::quantParamsOf(c.graph(), x);
    if (!p) Ctx::fail(n, "the quantization parameters of the input are unknown");
    c.setOutput(n, dequantize(c, n, x, *p));
  };
  t["quantized::conv2d"] = [](Ctx& c, N n) { conv2d(c, n, false); };
  t["quantized::conv2d_relu"] = [](Ctx& c, N n) { conv2d(c, n, true); };
  t["quantized::linear"] = [](Ctx& c, N n) { linear(c, n, false); };
  t["quantized::linear_relu"] = [](Ctx& c, N n) { linear(c, n, true); };
  t["quantized::add"] = [](Ctx& c, N n) { add(c, n, false); };
  t["quantized::add_relu"] = [](Ctx& c, N n) { add(c, n, true); };
  t["quantized::cat"] = [](Ctx& c, N n) { cat(c, n, false); };
  t["quantized::cat_relu"] = [](Ctx& c, N n) { cat(c, n, true); };
  wrapQuantized(t, "aten::adaptive_avg_pool2d", adaptiveAvgPoolQuantized);
  for (const char* kind : {"aten::relu", "aten::relu_"}) wrapQuantized(t, kind, reluQuantized);
  for (const char* kind : {"aten::hardtanh", "aten::hardtanh_"}) wrapQuantized(t, kind, hardtanhQuantized);
  for (const char* kind : {"aten::relu6", "aten::relu6_"}) wrapQuantized(t, kind, relu6Quantized);
}

}  // namespace kiln::importers::ts

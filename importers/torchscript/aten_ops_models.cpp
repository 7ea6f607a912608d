// aten:: → Kiln mappings for whole-model building blocks, written with Kiln's canonical operators:
// group_norm / instance_norm, transposed convolution, upsampling (nearest, bilinear),
// pixel_shuffle, baddbmm, the attention kernels that nn.MultiheadAttention and
// nn.TransformerEncoderLayer trace to on their fast path (aten::_native_multi_head_attention,
// aten::_transformer_encoder_layer_fwd), and activations composed of existing ops (elu,
// softplus, mish, ...).
#include <cmath>
#include <limits>

#include "importers/torchscript/aten_helpers.h"

namespace kiln::importers::ts {
namespace {

ValueId scalarMul(Ctx& c, N n, ValueId x, double s, const std::string& stem = {}) {
  if (s == 1.0) return x;
  return c.emit(n, "mul", {x, c.scalarConstant(s, c.type(x).dtype)}, {}, stem);
}

// --- normalization ---------------------------------------------------------------------------

/// x [N, C, *] normalized per (sample, group of C / groups channels), then scaled per channel.
ValueId emitGroupNorm(Ctx& c, N n, ValueId x, int64_t groups, std::optional<ValueId> weight,
                      std::optional<ValueId> bias, double eps) {
  const Shape s = c.type(x).shape;
  if (s.size() < 2 || groups <= 0 || s[1] % groups != 0)
    Ctx::fail(n, "cannot split the channels of " + c.type(x).str() + " into " + std::to_string(groups) + " groups",
              ErrorKind::InvalidModel);
  int64_t rest = c.type(x).numel() / (s[0] * groups);
  ValueId grouped = reshapeTo(c, n, x, {s[0], groups, rest}, "gn_grouped");
  ValueId y = emitLayerNorm(c, n, grouped, 1, std::nullopt, std::nullopt, eps);
  y = reshapeTo(c, n, y, s, weight || bias ? "gn_normalized" : "");
  Shape perChannel(s.size() - 1, 1);
  perChannel[0] = s[1];
  if (weight) y = c.emit(n, "mul", {y, reshapeTo(c, n, *weight, perChannel, "gn_weight")}, {}, bias ? "gn_scaled" : "");
  if (bias) y = c.emit(n, "add", {y, reshapeTo(c, n, *bias, perChannel, "gn_bias")});
  return y;
}

std::optional<ValueId> optionalTensor(Ctx& c, N n, size_t i) {
  if (i >= n->inputs().size() || c.isNone(n, i)) return std::nullopt;
  return c.tensor(n, i);
}

void groupNorm(Ctx& c, N n) {
  // group_norm(input, num_groups, weight?, bias?, eps, cudnn_enabled)
  ValueId x = c.tensor(n, 0);
  requireFloat(c, n, x);
  c.setOutput(n, emitGroupNorm(c, n, x, c.toInt(n, 1), optionalTensor(c, n, 2), optionalTensor(c, n, 3),
                               c.toDouble(n, 4)));
}

void instanceNorm(Ctx& c, N n) {
  // instance_norm(input, weight?, bias?, running_mean?, running_var?, use_input_stats, momentum, eps, cudnn)
  ValueId x = c.tensor(n, 0);
  requireFloat(c, n, x);
  if (c.type(x).rank() < 3) Ctx::fail(n, "expects a [N, C, ...] input, got " + c.type(x).str(), ErrorKind::InvalidModel);
  if (c.toBool(n, 5)) {
    c.setOutput(n, emitGroupNorm(c, n, x, c.type(x).shape[1], optionalTensor(c, n, 1), optionalTensor(c, n, 2),
                                 c.toDouble(n, 7)));
    return;
  }
  if (c.isNone(n, 3) || c.isNone(n, 4)) Ctx::fail(n, "use_input_stats=False needs running statistics");
  int64_t channels = c.type(x).shape[1];
  auto opts = at::TensorOptions().dtype(toTorchDType(c.type(x).dtype));
  ValueId gamma = c.isNone(n, 1) ? c.constant(at::ones({channels}, opts), "in_gamma") : c.tensor(n, 1);
  ValueId beta = c.isNone(n, 2) ? c.constant(at::zeros({channels}, opts), "in_beta") : c.tensor(n, 2);
  c.setOutput(n, c.emit(n, "batch_norm", {x, gamma, beta, c.tensor(n, 3), c.tensor(n, 4)},
                        {{"epsilon", c.toDouble(n, 7)}}));
}

// --- transposed convolution, resampling ------------------------------------------------------

std::vector<int64_t> spatialArg(Ctx& c, N n, size_t i, size_t rank) {
  std::vector<int64_t> v = c.toInts(n, i, rank);
  if (v.size() == 1 && rank > 1) v.assign(rank, v[0]);
  if (v.size() != rank) Ctx::fail(n, "argument " + c.argName(n, i) + " must have " + std::to_string(rank) + " values");
  return v;
}

struct TransposedArgs {
  size_t bias, stride, padding, outputPadding, groups, dilation;
};

void convTranspose(Ctx& c, N n, const TransposedArgs& a) {
  ValueId x = c.tensor(n, 0), w = c.tensor(n, 1);
  requireFloat(c, n, x);
  int64_t rank = c.type(w).rank();
  if (rank != 3 && rank != 4) Ctx::fail(n, std::to_string(rank - 2) + "-D transposed convolution is not supported");
  auto dims = static_cast<size_t>(rank - 2);
  Attrs attrs{{"groups", c.toInt(n, a.groups)}};
  std::vector<int64_t> stride = spatialArg(c, n, a.stride, dims), padding = spatialArg(c, n, a.padding, dims);
  std::vector<int64_t> outPad = spatialArg(c, n, a.outputPadding, dims), dilation = spatialArg(c, n, a.dilation, dims);
  std::vector<ValueId> inputs{x, w};
  if (!c.isNone(n, a.bias)) inputs.push_back(c.tensor(n, a.bias));
  if (dims == 1) {  // as 2-D over [N, C, 1, L]
    const Shape xs = c.type(x).shape, ws = c.type(w).shape;
    inputs[0] = reshapeTo(c, n, x, {xs[0], xs[1], 1, xs[2]}, "convt_in");
    inputs[1] = reshapeTo(c, n, w, {ws[0], ws[1], 1, ws[2]}, "convt_weight");
    for (auto* v : {&stride, &padding, &outPad}) v->insert(v->begin(), v == &stride ? 1 : 0);
    dilation.insert(dilation.begin(), 1);
  }
  attrs.set("stride", stride);
  attrs.set("padding", padding);
  attrs.set("output_padding", outPad);
  attrs.set("dilation", dilation);
  ValueId y = c.emit(n, "conv_transpose2d", inputs, attrs, dims == 1 ? "convt" : "");
  if (dims == 1) {
    const Shape ys = c.type(y).shape;
    y = reshapeTo(c, n, y, {ys[0], ys[1], ys[3]});
  }
  c.setOutput(n, y);
}

void convTransposeNd(Ctx& c, N n) {
  // conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)
  convTranspose(c, n, TransposedArgs{2, 3, 4, 5, 6, 7});
}

/// Resize of the last two axes of a rank-4 input; `scales` (source steps) when from scale factors.
void emitResize(Ctx& c, N n, const std::string& mode, bool alignCorners, std::vector<int64_t> size,
                std::optional<std::pair<double, double>> scales) {
  ValueId x = c.tensor(n, 0);
  requireFloat(c, n, x);
  if (c.type(x).rank() != 4) Ctx::notSupported(n, "only 2-D (rank-4) resizing is supported, got " + c.type(x).str());
  Attrs attrs{{"size", size}, {"mode", mode}, {"align_corners", static_cast<int64_t>(alignCorners)}};
  if (scales) {
    attrs.set("scale_h", scales->first);
    attrs.set("scale_w", scales->second);
  }
  c.setOutput(n, c.emit(n, "resize2d", {x}, attrs));
}

/// The output size and (for scale factors) the source steps of an upsample node.
std::pair<std::vector<int64_t>, std::optional<std::pair<double, double>>> upsampleSize(Ctx& c, N n, size_t sizeArg,
                                                                                        size_t scalesArg) {
  const Shape s = c.type(c.tensor(n, 0)).shape;
  if (s.size() != 4) Ctx::notSupported(n, "only 2-D (rank-4) resizing is supported");
  if (!c.isNone(n, sizeArg)) {
    std::vector<int64_t> size = spatialArg(c, n, sizeArg, 2);
    // The non-.vec overloads carry scales_h / scales_w next to the size.
    std::optional<std::pair<double, double>> scales;
    if (scalesArg + 1 < n->inputs().size() && !c.isNone(n, scalesArg) && !c.isNone(n, scalesArg + 1))
      scales = std::make_pair(1.0 / c.toDouble(n, scalesArg), 1.0 / c.toDouble(n, scalesArg + 1));
    return {size, scales};
  }
  const Item& arg = c.input(n, scalesArg);
  std::vector<double> factors;
  if (arg.isConstant() && arg.constant.isDoubleList()) factors = arg.constant.toDoubleVector();
  if (factors.size() == 1) factors.push_back(factors[0]);
  if (factors.size() != 2) Ctx::fail(n, "expects an output size or two scale factors");
  std::vector<int64_t> size{static_cast<int64_t>(std::floor(static_cast<double>(s[2]) * factors[0])),
                            static_cast<int64_t>(std::floor(static_cast<double>(s[3]) * factors[1]))};
  return {size, std::make_pair(1.0 / factors[0], 1.0 / factors[1])};
}

void upsampleNearest(Ctx& c, N n) {
  // .vec(input, output_size?, scale_factors?) or (self, output_size, scales_h?, scales_w?)
  bool vec = n->inputs().size() == 3;
  auto [size, scales] = upsampleSize(c, n, 1, 2);
  if (!vec && n->inputs().size() < 4) scales.reset();
  emitResize(c, n, "nearest", false, size, scales);
}

void upsampleBilinear(Ctx& c, N n) {
  // .vec(input, output_size?, align_corners, scale_factors?) or (self, output_size, align_corners,
  // scales_h?, scales_w?)
  bool vec = n->inputs().size() == 4;
  auto [size, scales] = upsampleSize(c, n, 1, 3);
  if (!vec && n->inputs().size() < 5) scales.reset();
  emitResize(c, n, "bilinear", c.toBool(n, 2), size, scales);
}

void pixelShuffle(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  int64_t r = c.toInt(n, 1);
  const Shape s = c.type(x).shape;
  if (s.size() != 4 || r <= 0 || s[1] % (r * r) != 0)
    Ctx::fail(n, "cannot shuffle " + c.type(x).str() + " by " + std::to_string(r), ErrorKind::InvalidModel);
  int64_t ch = s[1] / (r * r);
  ValueId y = reshapeTo(c, n, x, {s[0], ch, r, r, s[2], s[3]}, "ps_split");
  y = c.emit(n, "transpose", {y}, {{"perm", std::vector<int64_t>{0, 1, 4, 2, 5, 3}}}, "ps_moved");
  c.setOutput(n, reshapeTo(c, n, y, {s[0], ch, s[2] * r, s[3] * r}));
}

void pixelUnshuffle(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  int64_t r = c.toInt(n, 1);
  const Shape s = c.type(x).shape;
  if (s.size() != 4 || r <= 0 || s[2] % r != 0 || s[3] % r != 0)
    Ctx::fail(n, "cannot unshuffle " + c.type(x).str() + " by " + std::to_string(r), ErrorKind::InvalidModel);
  ValueId y = reshapeTo(c, n, x, {s[0], s[1], s[2] / r, r, s[3] / r, r}, "pu_split");
  y = c.emit(n, "transpose", {y}, {{"perm", std::vector<int64_t>{0, 1, 3, 5, 2, 4}}}, "pu_moved");
  c.setOutput(n, reshapeTo(c, n, y, {s[0], s[1] * r * r, s[2] / r, s[3] / r}));
}

// --- attention -------------------------------------------------------------------------------

void baddbmm(Ctx& c, N n) {
  // baddbmm(self, batch1, batch2, *, beta=1, alpha=1) = beta · self + alpha · batch1 @ batch2
  ValueId a = c.tensor(n, 1), b = c.tensor(n, 2);
  requireFloat(c, n, a);
  double beta = n->inputs().size() > 3 ? c.toDouble(n, 3) : 1.0;
  double alpha = n->inputs().size() > 4 ? c.toDouble(n, 4) : 1.0;
  ValueId y = scalarMul(c, n, c.emit(n, "matmul", {a, b}, {}, "bmm"), alpha, "bmm_scaled");
  if (beta == 0.0) return c.setOutput(n, y);
  ValueId self = scalarMul(c, n, c.tensor(n, 0), beta, "bias_scaled");
  c.setOutput(n, c.emit(n, "add", {y, self}));
}

/// Rows [begin, end) of a projection weight [3E, E] (or bias [3E]): sliced at import when constant.
ValueId rowsOf(Ctx& c, N n, size_t i, int64_t begin, int64_t end, const std::string& stem) {
  if (const at::Tensor* t = c.constantTensor(n, i)) return c.constant(t->narrow(0, begin, end - begin).contiguous(), stem);
  ValueId v = c.tensor(n, i);
  Shape s = c.type(v).shape;
  std::vector<int64_t> b(s.size(), 0), e = s, st(s.size(), 1);
  b[0] = begin;
  e[0] = end;
  return c.emit(n, "strided_slice", {v}, {{"begin", b}, {"end", e}, {"strides", st}}, stem);
}

struct Attention {
  ValueId query, key, value;
  size_t qkvWeight, qkvBias;  // node inputs holding the packed [3E, E] / [3E] projections
  ValueId projWeight, projBias;
  std::optional<ValueId> mask;  // bool, true = masked out
  int64_t maskType = 0;         // 0: [L, S], 1: key padding [B, S]
};

struct AttentionResult {
  ValueId output;
  ValueId probabilities;  // [B, H, L, S]
};

/// Batch-first multi-head attention as the fast-path kernels compute it:
/// q, k, v = x·Wᵀ + b per third of qkv_weight; q /= √D; softmax(q·kᵀ [masked]) · v; out projection.
AttentionResult emitAttention(Ctx& c, N n, const Attention& a, int64_t e, int64_t h) {
  requireFloat(c, n, a.query);
  const Shape qs = c.type(a.query).shape, ks = c.type(a.key).shape;
  if (qs.size() != 3 || ks.size() != 3 || qs[2] != e || h <= 0 || e % h != 0)
    Ctx::notSupported(n, "expects batch-first [B, L, E] inputs with E divisible by the heads, got " +
                             c.type(a.query).str());
  int64_t batch = qs[0], l = qs[1], s = ks[1], d = e / h;
  auto project = [&](ValueId x, int64_t part, const char* name) {
    ValueId w = rowsOf(c, n, a.qkvWeight, part * e, (part + 1) * e, std::string(name) + "_weight");
    ValueId b = rowsOf(c, n, a.qkvBias, part * e, (part + 1) * e, std::string(name) + "_bias");
    return c.emit(n, "dense", {x, w, b}, {}, name);
  };
  auto heads = [&](ValueId x, int64_t len, std::vector<int64_t> perm, const std::string& stem) {
    ValueId split = reshapeTo(c, n, x, {batch, len, h, d}, stem + "_split");
    return c.emit(n, "transpose", {split}, {{"perm", perm}}, stem + "_heads");
  };
  ValueId qp = scalarMul(c, n, project(a.query, 0, "q"), 1.0 / std::sqrt(static_cast<double>(d)), "q_scaled");
  ValueId qh = heads(qp, l, {0, 2, 1, 3}, "q");                        // [B, H, L, D]
  ValueId kh = heads(project(a.key, 1, "k"), s, {0, 2, 3, 1}, "k");    // [B, H, D, S]
  ValueId vh = heads(project(a.value, 2, "v"), s, {0, 2, 1, 3}, "v");  // [B, H, S, D]
  ValueId scores = c.emit(n, "matmul", {qh, kh}, {}, "scores");
  if (a.mask) {
    if (c.type(*a.mask).dtype != DType::Bool) Ctx::notSupported(n, "only boolean attention masks are supported");
    Shape view = a.maskType == 1 ? Shape{batch, 1, 1, s} : Shape{1, 1, l, s};
    if (c.type(*a.mask).numel() != runtime::numElements(view))
      Ctx::notSupported(n, "attention mask " + c.type(*a.mask).str() + " is neither [L, S] nor [B, S]");
    ValueId ninf = c.scalarConstant(-std::numeric_limits<double>::infinity(), c.type(scores).dtype);
    scores = c.emit(n, "where", {reshapeTo(c, n, *a.mask, view, "mask"), ninf, scores}, {}, "masked_scores");
  }
  ValueId probs = c.emit(n, "softmax", {scores}, {{"axis", int64_t{3}}}, "attention");
  ValueId context = c.emit(n, "matmul", {probs, vh}, {}, "context");
  ValueId merged = c.emit(n, "transpose", {context}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}, "context_t");
  merged = reshapeTo(c, n, merged, {batch, l, e}, "context_merged");
  return {c.emit(n, "dense", {merged, a.projWeight, a.projBias}, {}, "attn_out"), probs};
}

std::optional<ValueId> maskArg(Ctx& c, N n, size_t i) {
  if (i >= n->inputs().size() || c.isNone(n, i)) return std::nullopt;
  return c.tensor(n, i);
}

int64_t maskTypeArg(Ctx& c, N n, size_t i) {
  return i < n->inputs().size() && !c.isNone(n, i) ? c.toInt(n, i) : 0;
}

void nativeMultiHeadAttention(Ctx& c, N n) {
  // (query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias, mask,
  //  need_weights, average_attn_weights, mask_type) -> (out, weights)
  Attention a{c.tensor(n, 0), c.tensor(n, 1), c.tensor(n, 2), 5, 6, c.tensor(n, 7), c.tensor(n, 8),
              maskArg(c, n, 9), maskTypeArg(c, n, 12)};
  AttentionResult r = emitAttention(c, n, a, c.toInt(n, 3), c.toInt(n, 4));
  c.setOutput(n, r.output, 0);
  if (!c.toBool(n, 10)) {
    c.bind(n->output(1), Item::ofConstant(at::empty({0})));
    return;
  }
  ValueId weights = r.probabilities;
  if (c.toBool(n, 11))
    weights = c.emit(n, "mean", {weights}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
  c.setOutput(n, weights, 1);
}

void transformerEncoderLayer(Ctx& c, N n) {
  // (src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu, norm_first,
  //  eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1,
  //  ffn_weight_2, ffn_bias_2, mask, mask_type)
  bool gelu = c.toBool(n, 7), normFirst = c.toBool(n, 8);
  double eps = c.toDouble(n, 9);
  int64_t e = c.toInt(n, 1), h = c.toInt(n, 2);
  auto norm = [&](ValueId x, size_t w) { return emitLayerNorm(c, n, x, 1, c.tensor(n, w), c.tensor(n, w + 1), eps); };
  auto attention = [&](ValueId x) {
    Attention a{x, x, x, 3, 4, c.tensor(n, 5), c.tensor(n, 6), maskArg(c, n, 18), maskTypeArg(c, n, 19)};
    return emitAttention(c, n, a, e, h).output;
  };
  auto ffn = [&](ValueId x) {
    ValueId hidden = c.emit(n, "dense", {x, c.tensor(n, 14), c.tensor(n, 15)}, {}, "ffn_hidden");
    hidden = gelu ? c.emit(n, "gelu", {hidden}, {{"approximate", std::string("none")}}, "ffn_act")
                  : c.emit(n, "relu", {hidden}, {}, "ffn_act");
    return c.emit(n, "dense", {hidden, c.tensor(n, 16), c.tensor(n, 17)}, {}, "ffn_out");
  };
  ValueId x = c.tensor(n, 0);
  if (normFirst) {
    x = c.emit(n, "add", {x, attention(norm(x, 10))}, {}, "residual1");
    x = c.emit(n, "add", {x, ffn(norm(x, 12))});
  } else {
    x = norm(c.emit(n, "add", {x, attention(x)}, {}, "residual1"), 10);
    x = norm(c.emit(n, "add", {x, ffn(x)}, {}, "residual2"), 12);
  }
  c.setOutput(n, x);
}

// --- activations composed of existing ops ----------------------------------------------------

/// elu / celu / selu: scale · (x > 0 ? x : alpha · (exp(x · inputScale) − 1)).
void eluFamily(Ctx& c, N n, double alpha, double scale, double inputScale) {
  ValueId x = c.tensor(n, 0);
  requireFloat(c, n, x);
  DType t = c.type(x).dtype;
  ValueId e = c.emit(n, "exp", {scalarMul(c, n, x, inputScale, "elu_in")}, {}, "elu_exp");
  ValueId neg = scalarMul(c, n, c.emit(n, "sub", {e, c.scalarConstant(1.0, t)}, {}, "elu_em1"), alpha, "elu_neg");
  ValueId pos = c.emit(n, "greater", {x, c.scalarConstant(0.0, t)}, {}, "elu_pos");
  ValueId y = c.emit(n, "where", {pos, x, neg}, {}, scale == 1.0 ? "" : "elu");
  c.setOutput(n, scalarMul(c, n, y, scale));
}

void elu(Ctx& c, N n) {
  // elu(self, alpha=1, scale=1, input_scale=1)
  double alpha = n->inputs().size() > 1 ? c.toDouble(n, 1) : 1.0;
  double scale = n->inputs().size() > 2 ? c.toDouble(n, 2) : 1.0;
  double inputScale = n->inputs().size() > 3 ? c.toDouble(n, 3) : 1.0;
  eluFamily(c, n, alpha, scale, inputScale);
}

void selu(Ctx& c, N n) { eluFamily(c, n, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0); }

void celu(Ctx& c, N n) {
  double alpha = n->inputs().size() > 1 ? c.toDouble(n, 1) : 1.0;
  eluFamily(c, n, alpha, 1.0, 1.0 / alpha);
}

/// softplus(x, beta, threshold) = x when beta·x > threshold, else log(1 + exp(beta·x)) / beta.
ValueId emitSoftplus(Ctx& c, N n, ValueId x, double beta, double threshold) {
  DType t = c.type(x).dtype;
  ValueId bx = scalarMul(c, n, x, beta, "sp_scaled");
  ValueId e = c.emit(n, "exp", {c.emit(n, "minimum", {bx, c.scalarConstant(threshold, t)}, {}, "sp_capped")}, {}, "sp_exp");
  ValueId soft = scalarMul(c, n, c.emit(n, "log", {c.emit(n, "add", {e, c.scalarConstant(1.0, t)}, {}, "sp_1p")}, {}, "sp_log"),
                           1.0 / beta, "sp_soft");
  ValueId linear = c.emit(n, "greater", {bx, c.scalarConstant(threshold, t)}, {}, "sp_linear");
  return c.emit(n, "where", {linear, x, soft}, {}, "softplus");
}

void softplus(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  requireFloat(c, n, x);
  double beta = n->inputs().size() > 1 ? c.toDouble(n, 1) : 1.0;
  double threshold = n->inputs().size() > 2 ? c.toDouble(n, 2) : 20.0;
  c.setOutput(n, emitSoftplus(c, n, x, beta, threshold));
}

void mish(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  requireFloat(c, n, x);
  ValueId t = c.emit(n, "tanh", {emitSoftplus(c, n, x, 1.0, 20.0)}, {}, "mish_tanh");
  c.setOutput(n, c.emit(n, "mul", {x, t}));
}

void square(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  c.setOutput(n, c.emit(n, "mul", {x, x}));
}

void reciprocal(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  requireFloat(c, n, x);
  c.setOutput(n, c.emit(n, "div", {c.scalarConstant(1.0, c.type(x).dtype), x}));
}

void glu(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  requireFloat(c, n, x);
  const Shape s = c.type(x).shape;
  int64_t axis = normDim(n, n->inputs().size() > 1 ? c.toInt(n, 1) : -1, c.type(x).rank());
  if (s[axis] % 2 != 0) Ctx::fail(n, "glu needs an even dimension, got " + c.type(x).str(), ErrorKind::InvalidModel);
  auto half = [&](int64_t part) {
    std::vector<int64_t> b(s.size(), 0), e = s, st(s.size(), 1);
    b[axis] = part * s[axis] / 2;
    e[axis] = (part + 1) * s[axis] / 2;
    return c.emit(n, "strided_slice", {x}, {{"begin", b}, {"end", e}, {"strides", st}}, part ? "glu_gate" : "glu_value");
  };
  ValueId a = half(0), g = c.emit(n, "sigmoid", {half(1)}, {}, "glu_sigmoid");
  c.setOutput(n, c.emit(n, "mul", {a, g}));
}

/// linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None) and
/// norm(self, p, dim, keepdim[, dtype]) (F.normalize, Swin v2's cosine attention): ord 2 as
/// sqrt(sum(x · x)), 1 as sum(|x|), ±inf as max/min(|x|), any other p as sum(|x|^p)^(1/p).
/// ord 0 (a count of non-zeros) and a dtype that casts are refused.
void vectorNorm(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  requireFloat(c, n, x);
  int64_t rank = c.type(x).rank();
  size_t nIn = n->inputs().size();
  double ord = nIn > 1 && !c.isNone(n, 1) ? c.toDouble(n, 1) : 2.0;
  std::vector<int64_t> axes;
  if (nIn > 2 && !c.isNone(n, 2)) axes = c.toInts(n, 2, 1);
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  for (int64_t& a : axes) a = normDim(n, a, rank);
  bool keep = nIn > 3 && c.toBool(n, 3);
  if (nIn > 4 && !c.isNone(n, 4) && toKilnDType(static_cast<c10::ScalarType>(c.toInt(n, 4))) != c.type(x).dtype)
    Ctx::fail(n, "a dtype argument that casts is not supported");
  if (ord == 0.0) Ctx::fail(n, "ord=0 (a count of non-zero elements) is not supported");
  DType dtype = c.type(x).dtype;
  Attrs reduceAttrs{{"axes", axes}, {"keepdims", static_cast<int64_t>(keep)}};
  if (std::isinf(ord)) {
    ValueId a = c.emit(n, "abs", {x}, {}, "norm_abs");
    return c.setOutput(n, c.emit(n, ord > 0 ? "max" : "min", {a}, reduceAttrs));
  }
  if (ord == 2.0) {
    ValueId sq = c.emit(n, "mul", {x, x}, {}, "norm_squared");
    return c.setOutput(n, c.emit(n, "sqrt", {c.emit(n, "sum", {sq}, reduceAttrs, "norm_sum")}));
  }
  ValueId a = c.emit(n, "abs", {x}, {}, "norm_abs");
  if (ord == 1.0) return c.setOutput(n, c.emit(n, "sum", {a}, reduceAttrs));
  ValueId powered = c.emit(n, "pow", {a, c.scalarConstant(ord, dtype)}, {}, "norm_pow");
  ValueId sum = c.emit(n, "sum", {powered}, reduceAttrs, "norm_sum");
  c.setOutput(n, c.emit(n, "pow", {sum, c.scalarConstant(1.0 / ord, dtype)}));
}

}  // namespace

void registerModelOps(Table& t) {
  reg(t, "group_norm", groupNorm);
  reg(t, "instance_norm", instanceNorm);
  reg(t, "conv_transpose2d", convTransposeNd);
  reg(t, "conv_transpose1d", convTransposeNd);
  reg(t, "upsample_nearest2d", upsampleNearest);
  reg(t, "upsample_bilinear2d", upsampleBilinear);
  reg(t, "pixel_shuffle", pixelShuffle);
  reg(t, "pixel_unshuffle", pixelUnshuffle);
  reg(t, "baddbmm", baddbmm);
  reg(t, "_native_multi_head_attention", nativeMultiHeadAttention);
  reg(t, "_transformer_encoder_layer_fwd", transformerEncoderLayer);
  reg(t, "elu", elu, true);
  reg(t, "selu", selu, true);
  reg(t, "celu", celu, true);
  reg(t, "softplus", softplus);
  reg(t, "mish", mish, true);
  reg(t, "square", square, true);
  reg(t, "reciprocal", reciprocal, true);
  reg(t, "glu", glu);
  reg(t, "linalg_vector_norm", vectorNorm);
  reg(t, "norm", [](Ctx& c, N n) {  // the overloads whose arguments line up with linalg_vector_norm's
    const c10::FunctionSchema* schema = n->maybeSchema();
    std::string overload = schema ? schema->overload_name() : "";
    if (overload != "Scalar" && overload != "ScalarOpt_dim" && overload != "ScalarOpt_dim_dtype")
      Ctx::notSupported(n, "overload '" + overload + "' (use torch.linalg.vector_norm)");
    vectorNorm(c, n);
  });
}

/// _convolution with transposed=true: (input, weight, bias, stride, padding, dilation,
/// transposed, output_padding, groups, ...).
void convolutionTransposed(Ctx& c, N n) { convTranspose(c, n, TransposedArgs{2, 3, 4, 7, 8, 5}); }

}  // namespace kiln::importers::ts

// Operators that torch.export programs hold and traced TorchScript does not (importers/torch_export.h
// rebuilds such programs as TorchScript graphs for this walker). Some are newer than Debian's
// libtorch 1.13, which has no schema for them: the torch.export importer then creates the node with
// every argument in the order of the newer schema (defaults filled in), which is what these
// handlers read:
// - _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean, running_var, momentum,
//   eps) -> (out, save_mean, save_invstd): eval-mode BatchNorm (the statistics are empty tensors);
// - scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
//   *, scale=None, enable_gqa=False): softmax(q·kᵀ·scale [masked]) · v with matmul, softmax, where;
// - _safe_softmax(self, dim, dtype=None): softmax, with 0 (not NaN) over a row that is masked out
//   entirely (all -inf): where(max(row) == -inf, 0, softmax(row));
// - unflatten(self, dim, sizes): a reshape of one axis into several;
// - lift_fresh_copy(self): the copy of a constant tensor, an identity here.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "importers/torchscript/aten_helpers.h"
#include "importers/torchscript/context.h"

namespace kiln::importers::ts {
namespace {

void batchNormNoTraining(Ctx& c, N n) {
  if (c.isNone(n, 3) || c.isNone(n, 4))
    Ctx::fail(n, "batch norm without running statistics (batch statistics) is not supported");
  ValueId x = c.tensor(n, 0);
  requireFloat(c, n, x);
  const core::TensorType xt = c.type(x);
  if (xt.rank() < 2) Ctx::fail(n, "batch norm input must have rank >= 2, got " + xt.str(), ErrorKind::InvalidModel);
  auto opts = at::TensorOptions().dtype(toTorchDType(xt.dtype));
  ValueId gamma = c.isNone(n, 1) ? c.constant(at::ones({xt.shape[1]}, opts), "bn_gamma") : c.tensor(n, 1);
  ValueId beta = c.isNone(n, 2) ? c.constant(at::zeros({xt.shape[1]}, opts), "bn_beta") : c.tensor(n, 2);
  ValueId mean = c.tensor(n, 3), var = c.tensor(n, 4);
  c.setOutput(n, c.emit(n, "batch_norm", {x, gamma, beta, mean, var}, {{"epsilon", c.toDouble(n, 6)}}));
  for (size_t i = 1; i < n->outputs().size(); ++i) c.bind(n->output(i), Item::ofConstant(at::empty({0}, opts)));
}

/// softmax(x) along `axis`, with 0 over a row that is -inf throughout (masked out entirely) where
/// softmax gives NaN: PyTorch's _safe_softmax, which its attention uses under a mask.
ValueId safeSoftmaxOf(Ctx& c, N n, ValueId x, int64_t axis) {
  const DType dtype = c.type(x).dtype;
  ValueId y = c.emit(n, "softmax", {x}, {{"axis", axis}}, "attention");
  ValueId rowMax = c.emit(n, "max", {x}, {{"axes", std::vector<int64_t>{axis}}, {"keepdims", int64_t{1}}}, "row_max");
  ValueId ninf = c.scalarConstant(-std::numeric_limits<double>::infinity(), dtype);
  ValueId maskedOut = c.emit(n, "equal", {rowMax, ninf}, {}, "row_masked_out");
  return c.emit(n, "where", {maskedOut, c.scalarConstant(0.0, dtype), y}, {}, "safe_attention");
}

void scaledDotProductAttention(Ctx& c, N n) {
  ValueId q = c.tensor(n, 0), k = c.tensor(n, 1), v = c.tensor(n, 2);
  requireFloat(c, n, q);
  const Shape qs = c.type(q).shape, ks = c.type(k).shape;
  const auto rank = static_cast<int64_t>(qs.size());
  if (rank < 2 || ks.size() != qs.size() || c.type(v).rank() != rank)
    Ctx::fail(n, "expects query, key and value of the same rank >= 2, got " + c.type(q).str() + ", " +
                     c.type(k).str() + ", " + c.type(v).str(),
              ErrorKind::InvalidModel);
  if (n->inputs().size() > 4 && c.toDouble(n, 4) != 0.0)
    Ctx::notSupported(n, "dropout_p > 0 (export the model in eval mode)");
  if (n->inputs().size() > 7 && c.toBool(n, 7)) Ctx::notSupported(n, "enable_gqa=True");
  const DType dtype = c.type(q).dtype;
  double scale = 1.0 / std::sqrt(static_cast<double>(qs.back()));
  if (n->inputs().size() > 6 && !c.isNone(n, 6)) scale = c.toDouble(n, 6);
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::swap(perm[rank - 2], perm[rank - 1]);
  ValueId kt = c.emit(n, "transpose", {k}, {{"perm", perm}}, "key_t");
  ValueId scores = c.emit(n, "matmul", {q, kt}, {}, "scores");
  if (scale != 1.0) scores = c.emit(n, "mul", {scores, c.scalarConstant(scale, dtype)}, {}, "scores_scaled");
  ValueId ninf = c.scalarConstant(-std::numeric_limits<double>::infinity(), dtype);
  if (n->inputs().size() > 5 && c.toBool(n, 5)) {
    // is_causal: query i attends to keys 0..i (the top-left aligned lower triangle).
    at::Tensor causal = at::ones({qs[rank - 2], ks[rank - 2]}, at::kBool).tril();
    scores = c.emit(n, "where", {c.constant(causal, "causal_mask"), scores, ninf}, {}, "causal_scores");
  }
  const bool masked = n->inputs().size() > 3 && !c.isNone(n, 3);
  if (masked) {
    ValueId mask = c.tensor(n, 3);
    if (c.type(mask).dtype == DType::Bool) {
      scores = c.emit(n, "where", {mask, scores, ninf}, {}, "masked_scores");
    } else {
      if (c.type(mask).dtype != dtype) Ctx::notSupported(n, "an attention mask of another dtype than the query");
      scores = c.emit(n, "add", {scores, mask}, {}, "masked_scores");
    }
  }
  // Under a mask a query may see no key at all: its weights are 0, as in PyTorch, not NaN.
  ValueId probs = masked ? safeSoftmaxOf(c, n, scores, rank - 1)
                         : c.emit(n, "softmax", {scores}, {{"axis", rank - 1}}, "attention");
  c.setOutput(n, c.emit(n, "matmul", {probs, v}));
}

void safeSoftmax(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  requireFloat(c, n, x);
  if (n->inputs().size() > 2 && !c.isNone(n, 2) &&
      toKilnDType(static_cast<c10::ScalarType>(c.toInt(n, 2))) != c.type(x).dtype)
    Ctx::fail(n, "a dtype argument that casts is not supported");
  c.setOutput(n, safeSoftmaxOf(c, n, x, normDim(n, c.toInt(n, 1), c.type(x).rank())));
}

void unflatten(Ctx& c, N n) {
  ValueId x = c.tensor(n, 0);
  const Shape shape = c.type(x).shape;
  int64_t dim = normDim(n, c.toInt(n, 1), static_cast<int64_t>(shape.size()));
  std::vector<int64_t> sizes = c.toInts(n, 2);
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1 && infer < 0) {
      infer = static_cast<int64_t>(i);
      continue;
    }
    if (sizes[i] < 0) Ctx::fail(n, "invalid size " + std::to_string(sizes[i]), ErrorKind::InvalidModel);
    known *= sizes[i];
  }
  int64_t extent = shape.empty() ? 1 : shape[dim];
  if (infer >= 0) {
    if (known == 0 || extent % known != 0)
      Ctx::fail(n, "cannot unflatten a dimension of size " + std::to_string(extent), ErrorKind::InvalidModel);
    sizes[infer] = extent / known;
    known = extent;
  }
  if (known != extent)
    Ctx::fail(n, "sizes do not multiply to the dimension's size " + std::to_string(extent), ErrorKind::InvalidModel);
  Shape out(shape.begin(), shape.begin() + dim);
  out.insert(out.end(), sizes.begin(), sizes.end());
  if (!shape.empty()) out.insert(out.end(), shape.begin() + dim + 1, shape.end());
  c.setOutput(n, reshapeTo(c, n, x, out));
}

}  // namespace

void registerExportOps(Table& t) {
  reg(t, "_native_batch_norm_legit_no_training", batchNormNoTraining);
  reg(t, "scaled_dot_product_attention", scaledDotProductAttention);
  reg(t, "_safe_softmax", safeSoftmax);
  reg(t, "unflatten", unflatten);
  reg(t, "lift_fresh_copy", [](Ctx& c, N n) { c.bind(n->output(), c.input(n, 0)); });
}

}  // namespace kiln::importers::ts

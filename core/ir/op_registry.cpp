#include "core/ir/op_registry.h"

#include <algorithm>
#include <map>
#include <memory>

#include "runtime/error.h"

namespace kiln::core {
namespace {

using Types = std::vector<TensorType>;

[[noreturn]] void fail(const std::string& msg) { throw Error(msg, ErrorKind::InvalidModel); }

void requireRank(const TensorType& t, int64_t rank, const char* what) {
  if (t.rank() != rank)
    fail(std::string(what) + " must have rank " + std::to_string(rank) + ", got " + t.str());
}

int64_t normAxis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1)) fail("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  return a;
}

Types inferUnary(const Types& in, const Attrs&) { return {in[0]}; }

Types inferBinary(const Types& in, const Attrs&) {
  if (in[0].dtype != in[1].dtype)
    fail("operand dtypes differ: " + in[0].str() + " vs " + in[1].str());
  return {TensorType{in[0].dtype, broadcastShapes(in[0].shape, in[1].shape)}};
}

Types inferConv2d(const Types& in, const Attrs& attrs) {
  requireRank(in[0], 4, "conv2d input");
  requireRank(in[1], 4, "conv2d weight");
  auto stride = attrs.getPair("stride", 1), pad = attrs.getPair("padding", 0),
       dil = attrs.getPair("dilation", 1);
  int64_t groups = attrs.getInt("groups", 1);
  const Shape& x = in[0].shape;
  const Shape& w = in[1].shape;
  if (groups <= 0 || x[1] % groups != 0 || w[0] % groups != 0)
    fail("groups=" + std::to_string(groups) + " does not divide the channels of " + in[0].str());
  if (w[1] * groups != x[1])
    fail("weight " + in[1].str() + " does not match input channels " + std::to_string(x[1]) +
         " with groups=" + std::to_string(groups));
  if (in.size() == 3 && (in[2].rank() != 1 || in[2].shape[0] != w[0]))
    fail("bias " + in[2].str() + " does not match " + std::to_string(w[0]) + " output channels");
  int64_t oh = windowOutputSize(x[2], w[2], stride[0], pad[0], dil[0], false);
  int64_t ow = windowOutputSize(x[3], w[3], stride[1], pad[1], dil[1], false);
  if (oh <= 0 || ow <= 0) fail("kernel larger than padded input " + in[0].str());
  return {TensorType{in[0].dtype, {x[0], w[0], oh, ow}}};
}

Types inferBatchNorm(const Types& in, const Attrs&) {
  if (in[0].rank() < 2) fail("batch_norm input must have rank >= 2, got " + in[0].str());
  int64_t c = in[0].shape[1];
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].rank() != 1 || in[i].shape[0] != c)
      fail("batch_norm parameter " + in[i].str() + " does not match " + std::to_string(c) + " channels");
  }
  return {in[0]};
}

Types inferDense(const Types& in, const Attrs&) {
  if (in[0].rank() < 1) fail("dense input must have rank >= 1");
  requireRank(in[1], 2, "dense weight");
  int64_t k = in[0].shape.back();
  if (in[1].shape[1] != k) fail("weight " + in[1].str() + " does not match input " + in[0].str());
  if (in.size() == 3 && (in[2].rank() != 1 || in[2].shape[0] != in[1].shape[0]))
    fail("bias " + in[2].str() + " does not match weight " + in[1].str());
  Shape out = in[0].shape;
  out.back() = in[1].shape[0];
  return {TensorType{in[0].dtype, out}};
}

Types inferDensePacked(const Types& in, const Attrs&) {
  if (in[0].rank() < 1) fail("dense_packed input must have rank >= 1");
  requireRank(in[1], 3, "dense_packed weight [N/P, K, P]");
  if (in[1].shape[1] != in[0].shape.back()) fail("weight " + in[1].str() + " does not match input " + in[0].str());
  int64_t n = in[1].shape[0] * in[1].shape[2];
  if (in.size() == 3 && (in[2].rank() != 1 || in[2].shape[0] != n))
    fail("bias " + in[2].str() + " does not match weight " + in[1].str());
  Shape out = in[0].shape;
  out.back() = n;
  return {TensorType{in[0].dtype, out}};
}

Types inferMatmul(const Types& in, const Attrs&) {
  Shape a = in[0].shape, b = in[1].shape;
  if (a.empty() || b.empty()) fail("matmul operands must have rank >= 1");
  bool aVec = a.size() == 1, bVec = b.size() == 1;
  if (aVec) a.insert(a.begin(), 1);
  if (bVec) b.push_back(1);
  if (a.back() != b[b.size() - 2])
    fail("matmul inner dimensions differ: " + in[0].str() + " · " + in[1].str());
  Shape batchA(a.begin(), a.end() - 2), batchB(b.begin(), b.end() - 2);
  Shape out = broadcastShapes(batchA, batchB);
  if (!aVec) out.push_back(a[a.size() - 2]);
  if (!bVec) out.push_back(b.back());
  return {TensorType{in[0].dtype, out}};
}

Types inferReshape(const Types& in, const Attrs& attrs) {
  Shape shape = attrs.getInts("shape");
  int64_t known = 1;
  int inferAt = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferAt >= 0) fail("reshape has more than one -1");
      inferAt = static_cast<int>(i);
    } else if (shape[i] < 0) {
      fail("reshape has a negative dimension");
    } else {
      known *= shape[i];
    }
  }
  if (inferAt >= 0) {
    if (known == 0 || in[0].numel() % known != 0) fail("cannot reshape " + in[0].str());
    shape[inferAt] = in[0].numel() / known;
  }
  if (runtime::numElements(shape) != in[0].numel())
    fail("cannot reshape " + in[0].str() + " to " + runtime::shapeString(shape));
  return {TensorType{in[0].dtype, shape}};
}

Types inferTranspose(const Types& in, const Attrs& attrs) {
  const auto& perm = attrs.getInts("perm");
  if (static_cast<int64_t>(perm.size()) != in[0].rank()) fail("perm does not match rank of " + in[0].str());
  std::vector<bool> seen(perm.size(), false);
  Shape out;
  for (int64_t p : perm) {
    int64_t a = normAxis(p, in[0].rank());
    if (seen[a]) fail("perm repeats an axis");
    seen[a] = true;
    out.push_back(in[0].shape[a]);
  }
  return {TensorType{in[0].dtype, out}};
}

Types inferConcat(const Types& in, const Attrs& attrs) {
  int64_t axis = normAxis(attrs.getInt("axis"), in[0].rank());
  Shape out = in[0].shape;
  out[axis] = 0;
  for (const TensorType& t : in) {
    if (t.rank() != in[0].rank() || t.dtype != in[0].dtype) fail("concat operands differ in rank or dtype");
    for (int64_t d = 0; d < t.rank(); ++d) {
      if (d != axis && t.shape[d] != in[0].shape[d]) fail("concat operands differ outside the axis");
    }
    out[axis] += t.shape[axis];
  }
  return {TensorType{in[0].dtype, out}};
}

/// Pooling runs on NCHW or packed NCHW[x]c inputs (rank 5, the channel block last).
void requirePoolRank(const TensorType& t, const char* what) {
  if (t.rank() != 4 && t.rank() != 5) fail(std::string(what) + " must have rank 4 (NCHW) or 5 (NCHW[x]c), got " + t.str());
}

/// `shape` with its spatial axes (2, 3) replaced.
Shape withSpatial(Shape shape, int64_t h, int64_t w) {
  shape[2] = h;
  shape[3] = w;
  return shape;
}

Types inferPool(const Types& in, const Attrs& attrs) {
  requirePoolRank(in[0], "pooling input");
  auto k = attrs.getPair("kernel", 1);
  auto stride = attrs.has("stride") ? attrs.getPair("stride", 1) : k;
  auto pad = attrs.getPair("padding", 0), dil = attrs.getPair("dilation", 1);
  bool ceil = attrs.getInt("ceil_mode", 0) != 0;
  if (pad[0] * 2 > k[0] || pad[1] * 2 > k[1]) fail("pad should be at most half of the kernel size");
  const Shape& x = in[0].shape;
  int64_t oh = windowOutputSize(x[2], k[0], stride[0], pad[0], dil[0], ceil);
  int64_t ow = windowOutputSize(x[3], k[1], stride[1], pad[1], dil[1], ceil);
  if (oh <= 0 || ow <= 0) fail("pooling window larger than input " + in[0].str());
  return {TensorType{in[0].dtype, withSpatial(x, oh, ow)}};
}

Types inferAdaptivePool(const Types& in, const Attrs& attrs) {
  requirePoolRank(in[0], "adaptive pooling input");
  auto size = attrs.getPair("output_size", 1);
  if (size[0] <= 0 || size[1] <= 0) fail("output_size must be positive");
  return {TensorType{in[0].dtype, withSpatial(in[0].shape, size[0], size[1])}};
}

Types inferReduce(const Types& in, const Attrs& attrs) {
  int64_t rank = in[0].rank();
  std::vector<bool> reduced(rank, false);
  for (int64_t a : attrs.getInts("axes")) reduced[normAxis(a, rank)] = true;
  bool keep = attrs.getInt("keepdims", 0) != 0;
  Shape out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d]) out.push_back(in[0].shape[d]);
    else if (keep) out.push_back(1);
  }
  return {TensorType{in[0].dtype, out}};
}

Types inferSoftmax(const Types& in, const Attrs& attrs) {
  normAxis(attrs.getInt("axis"), in[0].rank());
  return {in[0]};
}

// ---- indexing, selection and image ops (imported from TorchScript / ONNX) -----------------------

Types inferStridedSlice(const Types& in, const Attrs& attrs) {
  const auto &begin = attrs.getInts("begin"), &end = attrs.getInts("end"), &strides = attrs.getInts("strides");
  int64_t rank = in[0].rank();
  if (static_cast<int64_t>(begin.size()) != rank || end.size() != begin.size() || strides.size() != begin.size())
    fail("strided_slice needs begin, end and strides for each of the " + std::to_string(rank) + " axes of " +
         in[0].str());
  Shape out;
  for (int64_t d = 0; d < rank; ++d) {
    if (strides[d] <= 0) fail("strided_slice strides must be positive");
    if (begin[d] < 0 || end[d] > in[0].shape[d] || begin[d] > std::max(end[d], begin[d]))
      fail("strided_slice range [" + std::to_string(begin[d]) + ", " + std::to_string(end[d]) + ") out of axis " +
           std::to_string(d) + " of " + in[0].str());
    out.push_back(end[d] > begin[d] ? (end[d] - begin[d] + strides[d] - 1) / strides[d] : 0);
  }
  return {TensorType{in[0].dtype, out}};
}

Types inferTake(const Types& in, const Attrs& attrs) {
  if (in[1].dtype != DType::Int64 && in[1].dtype != DType::Int32)
    fail("take indices must be int64 or int32, got " + in[1].str());
  int64_t axis = normAxis(attrs.getInt("axis", 0), in[0].rank());
  Shape out(in[0].shape.begin(), in[0].shape.begin() + axis);
  out.insert(out.end(), in[1].shape.begin(), in[1].shape.end());
  out.insert(out.end(), in[0].shape.begin() + axis + 1, in[0].shape.end());
  return {TensorType{in[0].dtype, out}};
}

Types inferBroadcastTo(const Types& in, const Attrs& attrs) {
  Shape shape = attrs.getInts("shape");
  if (broadcastShapes(in[0].shape, shape) != shape)
    fail("cannot broadcast " + in[0].str() + " to " + runtime::shapeString(shape));
  return {TensorType{in[0].dtype, shape}};
}

Types inferWhere(const Types& in, const Attrs&) {
  if (in[0].dtype != DType::Bool) fail("where condition must be bool, got " + in[0].str());
  if (in[1].dtype != in[2].dtype) fail("where operand dtypes differ: " + in[1].str() + " vs " + in[2].str());
  return {TensorType{in[1].dtype, broadcastShapes(broadcastShapes(in[0].shape, in[1].shape), in[2].shape)}};
}

Types inferCompare(const Types& in, const Attrs& attrs) {
  return {TensorType{DType::Bool, inferBinary(in, attrs)[0].shape}};
}

Types inferCast(const Types& in, const Attrs& attrs) {
  auto dtype = runtime::parseDType(attrs.getString("dtype"));
  if (!dtype) fail("unknown cast dtype '" + attrs.getString("dtype") + "'");
  return {TensorType{*dtype, in[0].shape}};
}

Types inferArgReduce(const Types& in, const Attrs& attrs) {
  Attrs reduce{{"axes", std::vector<int64_t>{attrs.getInt("axis")}}, {"keepdims", attrs.getInt("keepdims", 0)}};
  return {TensorType{DType::Int64, inferReduce(in, reduce)[0].shape}};
}

Types inferTopk(const Types& in, const Attrs& attrs) {
  int64_t axis = normAxis(attrs.getInt("axis"), in[0].rank());
  int64_t k = attrs.getInt("k");
  if (in[0].rank() == 0 || k < 0 || k > in[0].shape[axis])
    fail("topk k=" + std::to_string(k) + " out of range for " + in[0].str());
  Shape out = in[0].shape;
  out[axis] = k;
  return {TensorType{in[0].dtype, out}, TensorType{DType::Int64, out}};
}

// x [N, C, H, W] · w [C, O/groups, KH, KW] (+ b [O]) → [N, O, OH, OW] with
// OH = (H − 1)·stride − 2·pad + dilation·(KH − 1) + output_padding + 1.
Types inferConvTranspose2d(const Types& in, const Attrs& attrs) {
  requireRank(in[0], 4, "conv_transpose2d input");
  requireRank(in[1], 4, "conv_transpose2d weight");
  auto stride = attrs.getPair("stride", 1), pad = attrs.getPair("padding", 0),
       dil = attrs.getPair("dilation", 1);
  auto outPad = attrs.getPair("output_padding", 0);
  int64_t groups = attrs.getInt("groups", 1);
  const Shape &x = in[0].shape, &w = in[1].shape;
  if (groups <= 0 || x[1] % groups != 0 || w[0] != x[1])
    fail("weight " + in[1].str() + " does not match input " + in[0].str() + " with groups=" + std::to_string(groups));
  int64_t oc = w[1] * groups;
  if (in.size() == 3 && (in[2].rank() != 1 || in[2].shape[0] != oc))
    fail("bias " + in[2].str() + " does not match " + std::to_string(oc) + " output channels");
  int64_t oh = (x[2] - 1) * stride[0] - 2 * pad[0] + dil[0] * (w[2] - 1) + outPad[0] + 1;
  int64_t ow = (x[3] - 1) * stride[1] - 2 * pad[1] + dil[1] * (w[3] - 1) + outPad[1] + 1;
  if (oh <= 0 || ow <= 0) fail("conv_transpose2d output would be empty for " + in[0].str());
  return {TensorType{in[0].dtype, {x[0], oc, oh, ow}}};
}

Types inferResize2d(const Types& in, const Attrs& attrs) {
  requireRank(in[0], 4, "resize2d input");
  const std::string& mode = attrs.getString("mode");
  if (mode != "nearest" && mode != "bilinear") fail("resize2d mode '" + mode + "' is not nearest or bilinear");
  auto size = attrs.getPair("size", 1);
  if (size[0] <= 0 || size[1] <= 0) fail("resize2d size must be positive");
  return {TensorType{in[0].dtype, withSpatial(in[0].shape, size[0], size[1])}};
}

// ---- packed layouts (the O3 alter-layout pass, core/passes/alter_layout.h) --------------------

/// The channel block of a layout string: "NCHW" → 0, "NCHW16c" → 16; fails otherwise.
int64_t layoutBlock(const Attrs& attrs, const std::string& name) {
  const std::string& layout = attrs.getString(name);
  if (layout == "NCHW") return 0;
  auto digits = layout.size() > 5 ? layout.substr(4, layout.size() - 5) : std::string();
  if (layout.rfind("NCHW", 0) != 0 || layout.back() != 'c' || digits.empty() ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    fail("layout '" + layout + "' is neither NCHW nor NCHW<x>c");
  int64_t block = std::stoll(digits);
  if (block <= 0) fail("layout '" + layout + "' has a zero channel block");
  return block;
}

Types inferLayoutTransform(const Types& in, const Attrs& attrs) {
  int64_t src = layoutBlock(attrs, "src"), dst = layoutBlock(attrs, "dst");
  requireRank(in[0], src ? 5 : 4, "layout_transform input");
  Shape x = in[0].shape;
  if (src && x[4] != src) fail("input " + in[0].str() + " does not have channel block " + std::to_string(src));
  int64_t channels = src ? x[1] * src : x[1];
  Shape out = {x[0], channels, x[2], x[3]};
  if (dst) {
    if (channels % dst != 0) fail(std::to_string(channels) + " channels do not split into blocks of " + std::to_string(dst));
    out = {x[0], channels / dst, x[2], x[3], dst};
  }
  return {TensorType{in[0].dtype, out}};
}

// x [N, C/ib, H, W, ib] · w [O/ob, Cg/wib, KH, KW, wib, ob] (+ bias [O]) → [N, O/L, OH, OW, L]
// with L the block of out_layout. groups is 1 (wib = ib) or the channel count (depthwise: wib =
// 1, one weight input channel per output channel).
Types inferConv2dNchwc(const Types& in, const Attrs& attrs) {
  requireRank(in[0], 5, "conv2d_nchwc input");
  requireRank(in[1], 6, "conv2d_nchwc weight");
  auto stride = attrs.getPair("stride", 1), pad = attrs.getPair("padding", 0),
       dil = attrs.getPair("dilation", 1);
  int64_t groups = attrs.getInt("groups", 1);
  int64_t outBlock = layoutBlock(attrs, "out_layout");
  const Shape& x = in[0].shape;
  const Shape& w = in[1].shape;
  int64_t channels = x[1] * x[4], oc = w[0] * w[5];
  if (outBlock == 0 || w[5] % outBlock != 0)
    fail("weight " + in[1].str() + " does not match out_layout " + attrs.getString("out_layout"));
  if (groups == 1) {
    if (w[1] != x[1] || w[4] != x[4]) fail("weight " + in[1].str() + " does not match input " + in[0].str());
  } else if (groups != channels || oc != channels || w[1] != 1 || w[4] != 1) {
    fail("conv2d_nchwc supports groups=1 or depthwise, got groups=" + std::to_string(groups) + " for " +
         in[0].str() + " and weight " + in[1].str());
  }
  if (in.size() == 3 && (in[2].rank() != 1 || in[2].shape[0] != oc))
    fail("bias " + in[2].str() + " does not match " + std::to_string(oc) + " output channels");
  int64_t oh = windowOutputSize(x[2], w[2], stride[0], pad[0], dil[0], false);
  int64_t ow = windowOutputSize(x[3], w[3], stride[1], pad[1], dil[1], false);
  if (oh <= 0 || ow <= 0) fail("kernel larger than padded input " + in[0].str());
  return {TensorType{in[0].dtype, {x[0], oc / outBlock, oh, ow, outBlock}}};
}

// Winograd F(m×m, 3×3): x [N, C/ib, H, W, ib] · u [O/ob, α, α, C, ob] (α = m + 2, tile=m;
// u = G g Gᵀ per channel pair) (+ bias [O]) → [N, O/L, H + 2ph − 2, W + 2pw − 2, L].
Types inferConv2dWinogradNchwc(const Types& in, const Attrs& attrs) {
  requireRank(in[0], 5, "conv2d_winograd_nchwc input");
  requireRank(in[1], 5, "conv2d_winograd_nchwc weight");
  auto pad = attrs.getPair("padding", 0);
  int64_t tile = attrs.getInt("tile", 0), outBlock = layoutBlock(attrs, "out_layout");
  const Shape& x = in[0].shape;
  const Shape& u = in[1].shape;
  if (tile != 2 && tile != 4) fail("conv2d_winograd_nchwc tile must be 2 or 4, got " + std::to_string(tile));
  if (u[1] != tile + 2 || u[2] != tile + 2 || u[3] != x[1] * x[4])
    fail("weight " + in[1].str() + " does not match input " + in[0].str() + " and tile " + std::to_string(tile));
  if (outBlock == 0 || u[4] % outBlock != 0)
    fail("weight " + in[1].str() + " does not match out_layout " + attrs.getString("out_layout"));
  int64_t oc = u[0] * u[4];
  if (in.size() == 3 && (in[2].rank() != 1 || in[2].shape[0] != oc))
    fail("bias " + in[2].str() + " does not match " + std::to_string(oc) + " output channels");
  int64_t oh = x[2] + 2 * pad[0] - 2, ow = x[3] + 2 * pad[1] - 2;
  if (oh <= 0 || ow <= 0) fail("kernel larger than padded input " + in[0].str());
  return {TensorType{in[0].dtype, {x[0], oc / outBlock, oh, ow, outBlock}}};
}

// pad(x) {pads=[b_0, ..., b_{r-1}, a_0, ..., a_{r-1}], mode, value}: axis d grows by b_d before
// and a_d after (negative entries crop). reflect needs every positive pad below the axis size
// (the mirror must not run past the far edge); replicate and circular need a non-empty axis.
Types inferPad(const Types& in, const Attrs& attrs) {
  if (!attrs.has("pads") || !attrs.has("mode")) fail("pad needs the attributes pads and mode");
  const auto& pads = attrs.getInts("pads");
  const std::string& mode = attrs.getString("mode");
  int64_t rank = in[0].rank();
  if (static_cast<int64_t>(pads.size()) != 2 * rank)
    fail("pad needs " + std::to_string(2 * rank) + " pads (before and after each axis) for " + in[0].str() + ", got " +
         std::to_string(pads.size()));
  if (mode != "constant" && mode != "reflect" && mode != "replicate" && mode != "circular")
    fail("pad mode '" + mode + "' is not one of constant, reflect, replicate, circular");
  Shape out = in[0].shape;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t before = pads[d], after = pads[rank + d], size = in[0].shape[d];
    if (mode == "reflect" && (before >= size || after >= size))
      fail("reflect padding (" + std::to_string(before) + ", " + std::to_string(after) + ") of axis " +
           std::to_string(d) + " must be less than its size " + std::to_string(size) + " in " + in[0].str());
    if (mode != "constant" && size == 0 && (before > 0 || after > 0))
      fail(mode + " padding of the empty axis " + std::to_string(d) + " of " + in[0].str());
    out[d] = size + before + after;
    if (out[d] < 0)
      fail("padding (" + std::to_string(before) + ", " + std::to_string(after) + ") crops axis " + std::to_string(d) +
           " of " + in[0].str() + " below size 0");
  }
  return {TensorType{in[0].dtype, out}};
}

// ---- quantized dialect (qnn.*; imported from PyTorch quantized models, issue 9) ---------------

void requireDType(const TensorType& t, DType dtype, const char* what) {
  if (t.dtype != dtype) fail(std::string(what) + " must be " + std::string(runtime::dtypeName(dtype)) + ", got " + t.str());
}

void requirePerChannel(const Types& in, size_t first, int64_t channels, const char* op) {
  for (size_t i = first; i < in.size(); ++i) {
    requireDType(in[i], DType::Float32, "requantization parameter");
    if (in[i].rank() != 1 || in[i].shape[0] != channels)
      fail(std::string(op) + " requantization parameter " + in[i].str() + " does not match " +
           std::to_string(channels) + " output channels");
  }
}

Types inferQnnQuantize(const Types& in, const Attrs& attrs) {
  requireDType(in[0], DType::Float32, "qnn.quantize input");
  if (!attrs.has("out_layout") || attrs.getString("out_layout") == "NCHW") return {TensorType{DType::UInt8, in[0].shape}};
  int64_t block = layoutBlock(attrs, "out_layout");
  requireRank(in[0], 4, "qnn.quantize input with out_layout");
  const Shape& x = in[0].shape;
  return {TensorType{DType::UInt8, {x[0], (x[1] + block - 1) / block, x[2], x[3], block}}};
}

Types inferQnnDequantize(const Types& in, const Attrs&) {
  requireDType(in[0], DType::UInt8, "qnn.dequantize input");
  return {TensorType{DType::Float32, in[0].shape}};
}

Types inferQnnConv2d(const Types& in, const Attrs& attrs) {
  requireDType(in[0], DType::UInt8, "qnn.conv2d input");
  requireDType(in[1], DType::Int8, "qnn.conv2d weight");
  Types out = inferConv2d({in[0], in[1]}, attrs);
  requirePerChannel(in, 2, in[1].shape[0], "qnn.conv2d");
  return {TensorType{DType::UInt8, out[0].shape}};
}

Types inferQnnDense(const Types& in, const Attrs& attrs) {
  requireDType(in[0], DType::UInt8, "qnn.dense input");
  requireDType(in[1], DType::Int8, "qnn.dense weight");
  Types out = inferDense({in[0], in[1]}, attrs);
  const int64_t n = in[1].shape[0];
  requirePerChannel({in[0], in[1], in[2], in[3]}, 2, n, "qnn.dense");
  if (in.size() == 5 && (in[4].dtype != DType::Int32 || in[4].rank() != 1 || in[4].shape[0] != n))
    fail("qnn.dense zero-point sum " + in[4].str() + " must be i32[" + std::to_string(n) + "]");
  return {TensorType{DType::UInt8, out[0].shape}};
}

Types inferQnnAdd(const Types& in, const Attrs&) {
  requireDType(in[0], DType::UInt8, "qnn.add operand");
  requireDType(in[1], DType::UInt8, "qnn.add operand");
  if (in[0].shape != in[1].shape) fail("qnn.add operand shapes differ: " + in[0].str() + " vs " + in[1].str());
  return {in[0]};
}

// x [N, Cp/ib, H, W, ib] u8 · w [O/ob, Cp/4, KH, KW, ob, 4] i8 (depthwise: [O/ob, 1, KH, KW, ob, 1]),
// multiplier [O], offset [O] f32, the zero point's shares [R, O] i32 (a row per region of outputs
// whose windows reach the same taps; the lowering checks R) → [N, O/ob, OH, OW, ob] u8 with ob the
// block of out_layout.
Types inferQnnConv2dNchwc(const Types& in, const Attrs& attrs) {
  requireDType(in[0], DType::UInt8, "qnn.conv2d_nchwc input");
  requireDType(in[1], DType::Int8, "qnn.conv2d_nchwc weight");
  requireRank(in[0], 5, "qnn.conv2d_nchwc input");
  requireRank(in[1], 6, "qnn.conv2d_nchwc weight");
  auto stride = attrs.getPair("stride", 1), pad = attrs.getPair("padding", 0),
       dil = attrs.getPair("dilation", 1);
  int64_t outBlock = layoutBlock(attrs, "out_layout");
  const Shape &x = in[0].shape, &w = in[1].shape;
  int64_t groups = attrs.getInt("groups", 1), oc = w[0] * w[4];
  if (outBlock == 0 || w[4] != outBlock)
    fail("weight " + in[1].str() + " does not match out_layout " + attrs.getString("out_layout"));
  if (groups == 1 && (w[5] != 4 || w[1] * 4 != x[1] * x[4] || x[4] % 4 != 0))
    fail("weight " + in[1].str() + " does not match input " + in[0].str());
  if (groups != 1 && (w[1] != 1 || w[5] != 1 || x[4] != outBlock || x[1] * x[4] != oc))
    fail("qnn.conv2d_nchwc supports groups=1 or depthwise, got weight " + in[1].str() + " for " + in[0].str());
  requirePerChannel({in[0], in[1], in[2], in[3]}, 2, oc, "qnn.conv2d_nchwc");
  if (in[4].dtype != DType::Int32 || in[4].rank() != 2 || in[4].shape[1] != oc)
    fail("qnn.conv2d_nchwc zero-point shares " + in[4].str() + " must be i32[regions," + std::to_string(oc) +
         "]");
  int64_t oh = windowOutputSize(x[2], w[2], stride[0], pad[0], dil[0], false);
  int64_t ow = windowOutputSize(x[3], w[3], stride[1], pad[1], dil[1], false);
  if (oh <= 0 || ow <= 0) fail("kernel larger than padded input " + in[0].str());
  return {TensorType{DType::UInt8, {x[0], oc / outBlock, oh, ow, outBlock}}};
}

// ---- control flow (core/ir/graph.h) ------------------------------------------------------------

std::string typeList(const std::vector<TensorType>& types) {
  std::string s = "(";
  for (size_t i = 0; i < types.size(); ++i) s += (i ? ", " : "") + types[i].str();
  return s + ")";
}

std::vector<TensorType> regionInputTypes(const Graph& g) {
  std::vector<TensorType> out;
  for (ValueId v : g.inputs()) out.push_back(g.type(v));
  return out;
}

std::vector<TensorType> regionOutputTypes(const Graph& g) {
  std::vector<TensorType> out;
  for (ValueId v : g.outputs()) out.push_back(g.type(v));
  return out;
}

void requireOneElement(const TensorType& t, const char* what) {
  if (t.numel() != 1) fail(std::string(what) + " must hold one element, got " + t.str());
}

std::vector<TensorType> inferIf(const std::vector<TensorType>& in, const Attrs&, const std::vector<Region>& regions) {
  requireOneElement(in[0], "the condition");
  std::vector<TensorType> operands(in.begin() + 1, in.end());
  const char* names[] = {"then", "else"};
  for (int r = 0; r < 2; ++r)
    if (regionInputTypes(*regions[r]) != operands)
      fail(std::string("the ") + names[r] + " branch takes " + typeList(regionInputTypes(*regions[r])) +
           ", the node passes " + typeList(operands));
  std::vector<TensorType> out = regionOutputTypes(*regions[0]);
  if (out.empty()) fail("the branches return nothing");
  if (regionOutputTypes(*regions[1]) != out)
    fail("the then branch returns " + typeList(out) + ", the else branch " + typeList(regionOutputTypes(*regions[1])));
  return out;
}

std::vector<TensorType> inferLoop(const std::vector<TensorType>& in, const Attrs& attrs, const std::vector<Region>& regions) {
  int64_t carried = attrs.getInt("carried", -1);
  if (carried < 1 || carried > static_cast<int64_t>(in.size()) - 2)
    fail("carried=" + std::to_string(carried) + " must count 1 to " + std::to_string(in.size() - 2) + " operands");
  if (in[0].dtype != DType::Int64) fail("the trip count must be i64, got " + in[0].str());
  requireOneElement(in[0], "the trip count");
  requireOneElement(in[1], "the condition");
  std::vector<TensorType> state(in.begin() + 2, in.begin() + 2 + carried);
  std::vector<TensorType> bodyIn{TensorType{DType::Int64, {}}};
  bodyIn.insert(bodyIn.end(), in.begin() + 2, in.end());
  const Graph& body = *regions[0];
  if (regionInputTypes(body) != bodyIn)
    fail("the body takes " + typeList(regionInputTypes(body)) + ", expected " + typeList(bodyIn));
  std::vector<TensorType> bodyOut = regionOutputTypes(body);
  if (bodyOut.size() != state.size() + 1 || bodyOut[0].numel() != 1 ||
      !std::equal(state.begin(), state.end(), bodyOut.begin() + 1))
    fail("the body returns " + typeList(bodyOut) + ", expected a condition and " + typeList(state) +
         " (carried values keep their types)");
  return state;
}

struct Registry {
  std::map<std::string, OpDef, std::less<>> ops;
  void add(std::string name, std::string summary, int minIn, int maxIn, OpPattern pattern,
           decltype(OpDef::infer) infer) {
    OpDef def{name, std::move(summary), minIn, maxIn, pattern, std::move(infer)};
    ops.emplace(std::move(name), std::move(def));
  }
  void addWithRegions(std::string name, std::string summary, int minIn, int maxIn, int regions,
                      decltype(OpDef::inferWithRegions) infer) {
    OpDef def{name, std::move(summary), minIn, maxIn, OpPattern::Opaque,
              [name](const std::vector<TensorType>&, const Attrs&) -> std::vector<TensorType> {
                fail(name + " needs its sub-graphs to infer types");
              },
              regions, std::move(infer)};
    ops.emplace(std::move(name), std::move(def));
  }
};

const Registry& registry() {
  static const Registry* reg = [] {
    auto* r = new Registry();
    using P = OpPattern;
    r->add("conv2d", "2-D convolution, NCHW input, OIHW weight, optional bias", 2, 3, P::OutEWiseFusable, inferConv2d);
    r->add("batch_norm", "inference batch normalization over axis 1", 5, 5, P::Broadcast, inferBatchNorm);
    r->add("dense", "x · wᵀ + b over the last axis", 2, 3, P::OutEWiseFusable, inferDense);
    r->add("dense_packed", "dense with w packed at compile time into column panels [N/P, K, P]", 2, 3,
           P::OutEWiseFusable, inferDensePacked);
    r->add("matmul", "numpy-style batched matrix product", 2, 2, P::OutEWiseFusable, inferMatmul);
    for (const std::string& u : unaryElementwiseOps()) r->add(u, "elementwise " + u, 1, 1, P::ElemWise, inferUnary);
    r->add("copy", "elementwise copy", 1, 1, P::ElemWise, inferUnary);
    for (const std::string& b : binaryElementwiseOps()) r->add(b, "broadcasting " + b, 2, 2, P::Broadcast, inferBinary);
    r->add("reshape", "same elements, new static shape", 1, 1, P::Injective, inferReshape);
    r->add("transpose", "permute axes", 1, 1, P::Injective, inferTranspose);
    r->add("concat", "concatenate along an axis", 1, 64, P::Injective, inferConcat);
    r->add("max_pool2d", "2-D max pooling", 1, 1, P::OutEWiseFusable, inferPool);
    r->add("avg_pool2d", "2-D average pooling", 1, 1, P::OutEWiseFusable, inferPool);
    r->add("adaptive_avg_pool2d", "2-D adaptive average pooling", 1, 1, P::OutEWiseFusable, inferAdaptivePool);
    r->add("mean", "mean over axes", 1, 1, P::CommReduce, inferReduce);
    r->add("sum", "sum over axes", 1, 1, P::CommReduce, inferReduce);
    r->add("softmax", "softmax along an axis", 1, 1, P::Opaque, inferSoftmax);
    r->add("max", "maximum over axes", 1, 1, P::CommReduce, inferReduce);
    r->add("min", "minimum over axes", 1, 1, P::CommReduce, inferReduce);
    r->add("argmax", "index (int64) of the first maximum along an axis", 1, 1, P::CommReduce, inferArgReduce);
    r->add("argmin", "index (int64) of the first minimum along an axis", 1, 1, P::CommReduce, inferArgReduce);
    r->add("topk", "k largest (or smallest) values along an axis, sorted, and their int64 indices", 1, 1, P::Opaque,
           inferTopk);
    r->add("strided_slice", "elements begin, begin + stride, ... < end along every axis", 1, 1, P::Injective,
           inferStridedSlice);
    r->add("take", "gather along an axis by int64/int32 indices (embedding, index_select)", 2, 2, P::Injective,
           inferTake);
    r->add("broadcast_to", "numpy-broadcast to a static shape (expand)", 1, 1, P::Broadcast, inferBroadcastTo);
    r->add("where", "cond ? x : y with numpy broadcasting (cond bool)", 3, 3, P::Broadcast, inferWhere);
    for (const char* c : {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"})
      r->add(c, std::string("broadcasting comparison ") + c + " (bool result)", 2, 2, P::Broadcast, inferCompare);
    r->add("cast", "elementwise conversion to dtype (C semantics; to bool: non-zero)", 1, 1, P::ElemWise, inferCast);
    r->add("conv_transpose2d", "2-D transposed convolution, NCHW input, [C, O/groups, KH, KW] weight, optional bias",
           2, 3, P::Opaque, inferConvTranspose2d);
    r->add("pad", "constant, reflect, replicate or circular padding of any axes (negative pads crop)", 1, 1,
           P::Injective, inferPad);
    r->add("resize2d", "nearest or bilinear resize of NCHW spatial axes (size, mode, align_corners, scale)", 1, 1,
           P::Injective, inferResize2d);
    r->add("layout_transform", "NCHW <-> packed NCHW[x]c (src, dst layouts)", 1, 1, P::Injective,
           inferLayoutTransform);
    r->add("conv2d_nchwc", "2-D convolution in the packed NCHW[x]c layout with a pre-packed weight", 2, 3,
           P::OutEWiseFusable, inferConv2dNchwc);
    r->add("conv2d_winograd_nchwc", "3x3 convolution as Winograd F(m x m, 3x3) in the packed layout", 2, 3,
           P::OutEWiseFusable, inferConv2dWinogradNchwc);
    // Quantized dialect (op_registry.h, "Quantized operators"); kernels fuse their requantization.
    r->add("qnn.quantize", "f32 → u8: clamp(roundeven(x / output_scale) + output_zero_point) [out_layout]", 1, 1,
           P::Opaque, inferQnnQuantize);
    r->add("qnn.dequantize", "u8 → f32: (x − zero_point) · scale", 1, 1, P::Opaque, inferQnnDequantize);
    r->add("qnn.conv2d", "u8 × i8 convolution, i32 accumulation, per-channel requantization to u8", 4, 4, P::Opaque,
           inferQnnConv2d);
    r->add("qnn.conv2d_nchwc",
           "qnn.conv2d in the packed NCHW[x]c layout with a pre-packed weight (a fifth input: the input zero "
           "point's share zx·Σw over the taps inside the image, i32 [regions, O])",
           5, 5, P::Opaque, inferQnnConv2dNchwc);
    r->add("qnn.dense",
           "u8 × i8 dense layer, i32 accumulation, per-channel requantization to u8 (a fifth input: the "
           "input zero point's share zx·Σw per output, i32, which the sums then take off)",
           4, 5, P::Opaque, inferQnnDense);
    r->add("qnn.add", "sum of two u8 tensors requantized to u8", 2, 2, P::Opaque, inferQnnAdd);
    r->addWithRegions("if", "runs its then or else sub-graph on the condition", 1, 1 << 16, 2, inferIf);
    r->addWithRegions("loop", "runs its body sub-graph while i < trip and the condition holds, carrying values", 3,
                      1 << 16, 1, inferLoop);
    return r;
  }();
  return *reg;
}

}  // namespace

std::vector<TensorType> inferTypes(const OpDef& def, const std::vector<TensorType>& inputs, const Attrs& attrs,
                                   const std::vector<Region>& regions) {
  if (static_cast<int>(regions.size()) != def.regions)
    fail("expected " + std::to_string(def.regions) + " sub-graphs, got " + std::to_string(regions.size()));
  for (const Region& r : regions) KILN_ASSERT(r, def.name + ": null sub-graph");
  return def.regions ? def.inferWithRegions(inputs, attrs, regions) : def.infer(inputs, attrs);
}

const std::vector<std::string>& unaryElementwiseOps() {
  static const std::vector<std::string> ops = {"relu", "sigmoid", "tanh", "silu", "hardswish", "hardsigmoid",
                                               "exp",  "log",     "sqrt", "rsqrt", "neg",      "abs",
                                               "erf",  "gelu",    "leaky_relu", "clamp"};
  return ops;
}

const std::vector<std::string>& binaryElementwiseOps() {
  static const std::vector<std::string> ops = {"add", "sub", "mul", "div", "maximum", "minimum", "pow", "remainder"};
  return ops;
}

bool isUnaryElementwise(std::string_view op) {
  const auto& ops = unaryElementwiseOps();
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

bool isBinaryElementwise(std::string_view op) {
  const auto& ops = binaryElementwiseOps();
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

const OpDef* findOp(std::string_view name) {
  const auto& ops = registry().ops;
  auto it = ops.find(name);
  return it == ops.end() ? nullptr : &it->second;
}

std::vector<const OpDef*> allOps() {
  std::vector<const OpDef*> out;
  for (const auto& [name, def] : registry().ops) out.push_back(&def);
  return out;
}

Shape broadcastShapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      fail("shapes " + runtime::shapeString(a) + " and " + runtime::shapeString(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                         bool ceilMode) {
  if (stride <= 0 || dilation <= 0 || kernel <= 0) fail("kernel, stride and dilation must be positive");
  int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  // PyTorch: the last window must start inside the input or left padding.
  if (ceilMode && (out - 1) * stride >= in + pad) --out;
  return out;
}

}  // namespace kiln::core

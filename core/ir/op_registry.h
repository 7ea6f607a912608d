// The operator registry: one table of Kiln's canonical graph operators with their inputs,
// attributes, type/shape inference and fusion pattern. Everything that needs to know about an
// operator by name (the importer, the parser, lowering, fusion) looks it up here.
//
// Canonical operators and attributes (inputs in parentheses; [..] optional):
//   conv2d(x, w[, b])        stride=[sh,sw] padding=[ph,pw] dilation=[dh,dw] groups  (NCHW, OIHW)
//   batch_norm(x, gamma, beta, mean, var)  epsilon   (inference form, channel axis 1)
//   dense(x, w[, b])         y = x·wᵀ + b over the last axis (w is [N,K])
//   matmul(a, b)             numpy-style matmul with batch broadcasting (rank ≥ 1)
//   unary: relu sigmoid tanh silu hardswish hardsigmoid exp log sqrt rsqrt neg abs erf
//          gelu(approximate="none"|"tanh")  leaky_relu(alpha)  clamp(min, max)
//   binary with numpy broadcasting: add sub mul div maximum minimum pow remainder (the divisor's sign)
//   reshape(shape)  transpose(perm)  concat(axis)  copy()
//   max_pool2d / avg_pool2d(kernel, stride, padding, dilation, ceil_mode[, count_include_pad])
//   adaptive_avg_pool2d(output_size=[oh,ow])
//   mean / sum(axes, keepdims)   softmax(axis)
//   max_pool2d / avg_pool2d / adaptive_avg_pool2d also take packed NCHW[x]c inputs (rank 5).
//   max / min(axes, keepdims)    argmax / argmin(axis, keepdims) → i64 (first extreme wins)
//   topk(x) → (values, indices i64)   k axis largest (sorted; ties keep the lower index first)
//   strided_slice(begin, end, strides)  one entry per axis, normalized: 0 ≤ begin ≤ end ≤ dim,
//                                       strides > 0
//   take(data, indices) axis     out = data.shape[:axis] + indices.shape + data.shape[axis+1:];
//                                indices i64/i32, negative ones count from the end
//   broadcast_to(shape)  where(cond bool, x, y)  cast(dtype="f32"|"i64"|...)
//   comparisons with broadcasting, bool result: equal not_equal less less_equal greater
//                                               greater_equal
//   conv_transpose2d(x, w[, b])  stride padding output_padding dilation groups (w [C, O/g, KH, KW])
//   resize2d(x)                  size=[oh,ow] mode="nearest"|"bilinear" align_corners
//                                [scale_h, scale_w: source step per output step when given by a
//                                scale factor; else in/out]
//   pad(x)                       pads=[b_0, ..., b_{r-1}, a_0, ..., a_{r-1}] (b_d before and a_d
//                                after axis d, ONNX's order; negative ones crop) mode="constant"
//                                (value) | "reflect" (mirror without the edge; pads < the axis size)
//                                | "replicate" (repeat the edge) | "circular" (wrap around)
// Control flow (sub-graphs; core/ir/graph.h): if(cond, x...) and loop(trip, cond, v..., x...) carried
// Packed layouts (introduced by the O3 alter-layout pass, core/passes/alter_layout.h):
//   layout_transform(x)      src="NCHW"|"NCHW<x>c" dst="NCHW"|"NCHW<y>c"
//   conv2d_nchwc(x, w[, b])  x [N,C/x,H,W,x], w [O/y,C/x,KH,KW,x,y] (depthwise: [O/y,1,KH,KW,1,y]),
//                            b [O]; stride padding dilation groups (1 or C) out_layout="NCHW<z>c"
//                            (y a multiple of z); informative data_layout, kernel_layout
//   conv2d_winograd_nchwc(x, u[, b])  3×3, stride 1: x as above, u [O/y,m+2,m+2,C,y] the
//                            transformed filter (core/lower/schedule.h winogradMatrices), b [O];
//                            tile=m (2|4) padding out_layout
// Quantized operators (u8 activations with one scale and zero point per tensor, i8 weights with one
// scale per output channel; core/passes/qnn_alter_layout.h):
//   qnn.quantize(x f32)          output_scale output_zero_point [out_layout="NCHW<b>c": packed,
//                                channels padded to a multiple of b with the zero point]
//   qnn.dequantize(x u8)         scale zero_point → f32
//   qnn.conv2d(x u8, w i8, multiplier f32[O], offset f32[O])  conv2d's attributes, input_zero_point,
//                                output_zero_point, relu; y = clamp(roundeven((acc + offset[o])·
//                                multiplier[o] + output_zero_point), relu ? output_zero_point : 0, 255)
//                                in f32, with acc = Σ (x − input_zero_point)·w (i32; padding adds 0);
//                                informative input_scale, output_scale
//   qnn.dense(x u8, w i8 [N,K], multiplier, offset)          the same for a dense layer
//   qnn.add(a u8, b u8)          a_scale a_zero_point b_scale b_zero_point output_scale
//                                output_zero_point relu (equal shapes, any layout)
//   qnn.conv2d_nchwc(x, w, multiplier, offset, zsum i32[O])  packed form (qnn-alter-layout): x
//                                NCHW<ib>c (ib % 4 == 0), w [O/ob, Cp/4, KH, KW, ob, 4] (depthwise
//                                [O/ob, 1, KH, KW, ob, 1]), out_layout="NCHW<ob>c"; acc = Σ x·w over
//                                the window with padding reading input_zero_point, minus zsum[o]
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ir/graph.h"

namespace kiln::core {

/// How an operator may fuse (TVM's pattern kinds; used from opt level O2).
enum class OpPattern { ElemWise, Broadcast, Injective, CommReduce, OutEWiseFusable, Opaque };

struct OpDef {
  std::string name;
  std::string summary;
  int minInputs = 1;
  int maxInputs = 1;
  OpPattern pattern = OpPattern::Opaque;
  /// Throws kiln::Error with a short message (the caller adds the location).
  std::function<std::vector<TensorType>(const std::vector<TensorType>&, const Attrs&)> infer{};
  /// Operators with sub-graphs (if: 2, loop: 1) infer their types from them instead.
  int regions = 0;
  std::function<std::vector<TensorType>(const std::vector<TensorType>&, const Attrs&,
                                        const std::vector<Region>&)>
      inferWithRegions{};
};

/// The output types of `def` applied to `inputs`, `attrs` and `regions` (which must number
/// def.regions). Throws kiln::Error with a short message.
std::vector<TensorType> inferTypes(const OpDef& def, const std::vector<TensorType>& inputs, const Attrs& attrs,
                                   const std::vector<Region>& regions = {});

/// nullptr when unknown.
const OpDef* findOp(std::string_view name);

/// The elementwise operators on one tensor (relu, exp, gelu, clamp, ...; not copy) and the
/// broadcasting ones on two (add, sub, mul, div, maximum, minimum, pow, remainder): the one list
/// that registration, fusion, lowering, layout and the cost model share.
const std::vector<std::string>& unaryElementwiseOps();
const std::vector<std::string>& binaryElementwiseOps();
bool isUnaryElementwise(std::string_view op);
bool isBinaryElementwise(std::string_view op);

/// Every registered operator, sorted by name.
std::vector<const OpDef*> allOps();

/// Numpy broadcasting of two shapes; throws kiln::Error when incompatible.
Shape broadcastShapes(const Shape& a, const Shape& b);

/// Output extent of a pooling/convolution window along one axis.
int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                         bool ceilMode);

}  // namespace kiln::core

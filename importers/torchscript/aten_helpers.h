// Private to importers/torchscript: helpers shared by the aten:: mapping tables (aten_ops.cpp for
// the CNN operators, aten_ops_indexing.cpp for indexing, selection and reductions,
// aten_ops_models.cpp for normalization, image and attention blocks, aten_ops_padding.cpp for
// F.pad).
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>

#include "importers/torchscript/context.h"

namespace kiln::importers::ts {

using Ctx = ImportContext;
using N = const jit::Node*;
using core::Attrs;
using runtime::DType;
using runtime::Shape;
using Table = std::unordered_map<std::string, OpHandler>;

inline bool isFloat(DType t) { return t == DType::Float32 || t == DType::Float64; }

/// `dim` normalized against `rank` (a scalar counts as rank 1); InvalidModel when out of range.
inline int64_t normDim(N n, int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r)
    Ctx::fail(n, "dimension " + std::to_string(dim) + " out of range for rank " + std::to_string(rank),
              ErrorKind::InvalidModel);
  return dim < 0 ? dim + r : dim;
}

inline void requireFloat(Ctx& c, N n, ValueId x) {
  if (!isFloat(c.type(x).dtype))
    Ctx::fail(n, "input of type " + c.type(x).str() + " would need a cast to float, which is not supported");
}

/// `x` reshaped to `shape` (no node when it already has it).
inline ValueId reshapeTo(Ctx& c, N n, ValueId x, const Shape& shape, const std::string& stem = {}) {
  if (c.type(x).shape == shape) return x;
  return c.emit(n, "reshape", {x}, {{"shape", shape}}, stem);
}

/// A dtype probe standing for operand i in at::result_type (PyTorch's type promotion).
at::Tensor promotionProbe(Ctx& c, N n, size_t i);
/// Operand i as a Kiln value of dtype `dtype`, times `scale`. Numbers become rank-0 constants,
/// constant tensors are converted, a computed tensor of another dtype gets a cast.
ValueId operand(Ctx& c, N n, size_t i, c10::ScalarType dtype, double scale = 1.0);

/// Layer normalization over the last `dims` axes of `x` with existing ops (biased variance):
/// d = x − mean(x); y = d · rsqrt(mean(d · d) + eps) [· weight] [+ bias].
ValueId emitLayerNorm(Ctx& c, N n, ValueId x, int64_t dims, std::optional<ValueId> weight, std::optional<ValueId> bias,
                      double eps);

/// Registers "aten::name" and, when `inplace`, "aten::name_".
void reg(Table& t, const std::string& name, OpHandler handler, bool inplace = false);

/// Kiln's pad of `x` from PyTorch's pad list (last axis first, [before, after] per axis, negative
/// crops) in `mode` (constant with `value`, reflect, replicate, circular); `x` itself when nothing
/// is padded. Modes and sizes PyTorch rejects fail with one line (aten_ops_padding.cpp).
ValueId emitTorchPad(Ctx& c, N n, ValueId x, const std::vector<int64_t>& pad, const std::string& mode, double value,
                     const std::string& stem = {});

/// `base` with the box starting at `start` of sizes `length` (one per axis) replaced by `value`
/// (cast to base's dtype, reshaped to `length`): where(box mask, pad(value), base)
/// (aten_ops_writes.cpp; slice_scatter and writes through views).
ValueId emitRegionScatter(Ctx& c, N n, ValueId base, ValueId value, const Shape& start, const Shape& length);

/// aten::_convolution with transposed=true (aten_ops_models.cpp).
void convolutionTransposed(Ctx& c, N n);

void registerIndexingOps(Table& t);  // aten_ops_indexing.cpp
void registerModelOps(Table& t);     // aten_ops_models.cpp
void registerPaddingOps(Table& t);   // aten_ops_padding.cpp (F.pad in every mode)
void registerRecurrentOps(Table& t); // aten_ops_recurrent.cpp (lstm, gru unrolled over time)
void registerQuantizedOps(Table& t); // aten_ops_quantized.cpp (quantized::*, quint8 inputs)
void registerExportOps(Table& t);    // aten_ops_export.cpp (what torch.export programs add)
void registerWriteOps(Table& t);     // aten_ops_writes.cpp (new_zeros & co., fill_/zero_/copy_)
void registerEinsumOps(Table& t);    // aten_ops_einsum.cpp (einsum as transpose/reshape/matmul/sum)

}  // namespace kiln::importers::ts

// Reading a tensor's elements whatever their dtype: comparisons of outputs (kiln compare, the
// end-to-end tests) treat every dtype alike through this.
#pragma once

#include <cstdint>

#include "runtime/tensor.h"

namespace kiln::runtime {

/// Element `i` of `t` as a double: exact for every float32, int32, int8, uint8 and bool value, and
/// for int64 values up to 2^53.
inline double elementAsDouble(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::Float32: return t.data<float>()[i];
    case DType::Float64: return t.data<double>()[i];
    case DType::Int64: return static_cast<double>(t.data<int64_t>()[i]);
    case DType::Int32: return t.data<int32_t>()[i];
    case DType::Bool: return t.data<bool>()[i] ? 1 : 0;
    case DType::Int8: return t.data<int8_t>()[i];
    case DType::UInt8: return t.data<uint8_t>()[i];
  }
  return 0;
}

/// Whether element `i` is true as a condition (an if's, a loop's): nonzero, NaN included. The
/// executor running control flow and the pass inlining known branches share this rule.
inline bool elementIsTrue(const Tensor& t, int64_t i = 0) { return elementAsDouble(t, i) != 0; }

}  // namespace kiln::runtime

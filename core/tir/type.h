// Scalar and vector types of the loop IR.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/tensor.h"

namespace kiln::core::tir {

struct Type {
  enum class Code : uint8_t { Int, UInt, Float, Bool, Handle };
  Code code = Code::Int;
  uint8_t bits = 64;
  uint16_t lanes = 1;

  static Type i64(uint16_t lanes = 1) { return {Code::Int, 64, lanes}; }
  static Type i32(uint16_t lanes = 1) { return {Code::Int, 32, lanes}; }
  static Type i8(uint16_t lanes = 1) { return {Code::Int, 8, lanes}; }
  static Type u8(uint16_t lanes = 1) { return {Code::UInt, 8, lanes}; }
  static Type f32(uint16_t lanes = 1) { return {Code::Float, 32, lanes}; }
  static Type f64(uint16_t lanes = 1) { return {Code::Float, 64, lanes}; }
  static Type boolean(uint16_t lanes = 1) { return {Code::Bool, 1, lanes}; }
  static Type handle() { return {Code::Handle, 64, 1}; }
  static Type fromDType(runtime::DType dtype);

  bool isInt() const { return code == Code::Int || code == Code::UInt; }
  bool isFloat() const { return code == Code::Float; }
  bool isBool() const { return code == Code::Bool; }
  bool isVector() const { return lanes > 1; }
  Type element() const { return {code, bits, 1}; }
  Type withLanes(uint16_t n) const { return {code, bits, n}; }
  bool operator==(const Type&) const = default;
  /// "i64", "f32", "f32x8", "bool", "handle"
  std::string str() const;
};

}  // namespace kiln::core::tir

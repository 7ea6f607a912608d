// Tensors for the runtime: a dtype, a static shape and a reference-counted, 64-byte aligned
// buffer. Tensors are always dense and row-major (C order). Copying a Tensor shares its storage;
// use clone() for a deep copy. This header depends on the C++ standard library only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

enum class DType : uint8_t { Float32, Float64, Int64, Int32, Bool, Int8, UInt8 };

size_t dtypeSize(DType dtype);
/// Short names used by every text format: f32 f64 i64 i32 bool i8 u8.
std::string_view dtypeName(DType dtype);
std::optional<DType> parseDType(std::string_view name);

using Shape = std::vector<int64_t>;
int64_t numElements(const Shape& shape);
/// "[1,3,224,224]"
std::string shapeString(const Shape& shape);

/// Owns one aligned allocation.
class Storage {
 public:
  explicit Storage(size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return m_data; }
  size_t bytes() const { return m_bytes; }

 private:
  void* m_data = nullptr;
  size_t m_bytes = 0;
};

class Tensor {
 public:
  Tensor() = default;
  /// A zero-filled tensor.
  static Tensor zeros(DType dtype, Shape shape);
  /// A tensor viewing `bytes` of `storage` starting at `offset` (no copy).
  static Tensor view(std::shared_ptr<Storage> storage, size_t offset, DType dtype, Shape shape);

  bool defined() const { return m_storage != nullptr; }
  DType dtype() const { return m_dtype; }
  const Shape& shape() const { return m_shape; }
  int64_t numel() const { return numElements(m_shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtypeSize(m_dtype); }
  void* raw() const;
  template <typename T>
  T* data() const { return static_cast<T*>(raw()); }

  Tensor clone() const;
  /// Same storage, another shape with the same number of elements.
  Tensor reshaped(Shape shape) const;

 private:
  std::shared_ptr<Storage> m_storage;
  size_t m_offset = 0;
  DType m_dtype = DType::Float32;
  Shape m_shape;
};

}  // namespace kiln::runtime

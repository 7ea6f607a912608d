#include "runtime/tensor.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "runtime/error.h"

namespace kiln::runtime {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Int32: return 4;
    case DType::Bool: return 1;
    case DType::Int8: return 1;
    case DType::UInt8: return 1;
  }
  return 0;
}

std::string_view dtypeName(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "f32";
    case DType::Float64: return "f64";
    case DType::Int64: return "i64";
    case DType::Int32: return "i32";
    case DType::Bool: return "bool";
    case DType::Int8: return "i8";
    case DType::UInt8: return "u8";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  for (DType d : {DType::Float32, DType::Float64, DType::Int64, DType::Int32, DType::Bool,
                  DType::Int8, DType::UInt8}) {
    if (dtypeName(d) == name) return d;
  }
  return std::nullopt;
}

int64_t numElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shapeString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

/// Whether large blocks are backed by transparent huge pages (KILN_HUGEPAGES=0 turns it off).
bool hugePagesWanted() {
  static const bool wanted = [] {
    const char* v = std::getenv("KILN_HUGEPAGES");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return wanted;
}

}  // namespace

// Blocks of 2 MiB and more (the executor's activation blocks, packed weights) are aligned to
// 2 MiB and advised as huge pages before their first touch (Linux THP in its "madvise" mode,
// Debian's default, backs only advised memory). With 4 KiB pages a network's weights and
// activations need thousands of TLB entries, and how the kernel happened to place them varies
// from process to process; huge pages make both cheaper and alike in every process.
Storage::Storage(size_t bytes) : m_bytes(bytes) {
  size_t align = 64;
  if (bytes >= kHugePage && hugePagesWanted()) align = kHugePage;
  size_t rounded = (bytes + align - 1) / align * align;
  if (rounded == 0) rounded = align;
  m_data = std::aligned_alloc(align, rounded);
  if (!m_data) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (align == kHugePage) madvise(m_data, rounded, MADV_HUGEPAGE);  // advice: failure is harmless
#endif
  std::memset(m_data, 0, rounded);
}

Storage::~Storage() { std::free(m_data); }

Tensor Tensor::zeros(DType dtype, Shape shape) {
  for (int64_t d : shape) {
    if (d < 0) throw Error("negative dimension in shape " + shapeString(shape));
  }
  Tensor t;
  t.m_dtype = dtype;
  t.m_shape = std::move(shape);
  t.m_storage = std::make_shared<Storage>(t.nbytes());
  return t;
}

Tensor Tensor::view(std::shared_ptr<Storage> storage, size_t offset, DType dtype, Shape shape) {
  Tensor t;
  t.m_storage = std::move(storage);
  t.m_offset = offset;
  t.m_dtype = dtype;
  t.m_shape = std::move(shape);
  KILN_ASSERT(t.m_offset + t.nbytes() <= t.m_storage->bytes(), "tensor view exceeds its storage");
  return t;
}

void* Tensor::raw() const {
  if (!m_storage) return nullptr;
  return static_cast<char*>(m_storage->data()) + m_offset;
}

Tensor Tensor::clone() const {
  Tensor t = zeros(m_dtype, m_shape);
  if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  KILN_ASSERT(numElements(shape) == numel(), "reshape must keep the element count");
  Tensor t = *this;
  t.m_shape = std::move(shape);
  return t;
}

}  // namespace kiln::runtime

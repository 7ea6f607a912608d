// Buffers of the loop IR: named, typed, dense, row-major memory regions. A PrimFunc's parameters
// are buffers; Allocate statements introduce local ones. Identity is the node pointer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tir/type.h"

namespace kiln::core::tir {

struct BufferNode {
  std::string name;
  Type elemType;
  std::vector<int64_t> shape;
  int64_t numel() const;
  /// Row-major strides in elements.
  std::vector<int64_t> strides() const;
};
using Buffer = std::shared_ptr<const BufferNode>;

Buffer makeBuffer(const std::string& name, Type elemType, std::vector<int64_t> shape);

}  // namespace kiln::core::tir

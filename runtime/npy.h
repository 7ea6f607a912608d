// Reading and writing NumPy .npy files (format versions 1.0-3.0, little-endian, C order).
// Used by `kiln run` for inputs and outputs. Malformed files raise kiln::Error naming the file.
#pragma once

#include <iosfwd>
#include <string>

#include "runtime/tensor.h"

namespace kiln::runtime {

Tensor readNpy(const std::string& path);
void writeNpy(const std::string& path, const Tensor& tensor);
/// The same on streams; `name` is the file name used in error messages.
Tensor readNpy(std::istream& in, const std::string& name);
void writeNpy(std::ostream& out, const std::string& name, const Tensor& tensor);

}  // namespace kiln::runtime

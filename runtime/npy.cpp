#include "runtime/npy.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/error.h"

namespace kiln::runtime {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

std::string descrFor(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "<f4";
    case DType::Float64: return "<f8";
    case DType::Int64: return "<i8";
    case DType::Int32: return "<i4";
    case DType::Bool: return "|b1";
    case DType::Int8: return "|i1";
    case DType::UInt8: return "|u1";
  }
  return "";
}

std::optional<DType> dtypeForDescr(const std::string& d) {
  for (DType t : {DType::Float32, DType::Float64, DType::Int64, DType::Int32, DType::Bool,
                  DType::Int8, DType::UInt8}) {
    std::string want = descrFor(t);
    if (d == want) return t;
    // Single-byte types may be written with '<' or '=' instead of '|'.
    if (want[0] == '|' && d.size() == want.size() && d.substr(1) == want.substr(1)) return t;
  }
  return std::nullopt;
}

// Finds the value text after 'key': in a Python dict literal header.
std::string headerField(const std::string& header, const std::string& key,
                        const std::string& path) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) throw Error(path + ": malformed .npy header: no '" + key + "' field");
  size_t colon = header.find(':', k);
  if (colon == std::string::npos) throw Error(path + ": malformed .npy header near '" + key + "'");
  size_t start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos) throw Error(path + ": malformed .npy header near '" + key + "'");
  if (header[start] == '(') {
    size_t end = header.find(')', start);
    if (end == std::string::npos) throw Error(path + ": malformed .npy shape");
    return header.substr(start, end - start + 1);
  }
  size_t end = header.find_first_of(",}", start);
  return header.substr(start, end - start);
}

}  // namespace

Tensor readNpy(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, expected a .npy file", ErrorKind::Io);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file", ErrorKind::Io);
  return readNpy(in, path);
}

Tensor readNpy(std::istream& in, const std::string& path) {
  char magic[6];
  if (!in.read(magic, 6) || std::memcmp(magic, kMagic, 6) != 0)
    throw Error(path + ": not a .npy file (bad magic)");
  unsigned char version[2];
  if (!in.read(reinterpret_cast<char*>(version), 2)) throw Error(path + ": truncated .npy header");
  uint32_t headerLen = 0;
  if (version[0] == 1) {
    unsigned char b[2];
    if (!in.read(reinterpret_cast<char*>(b), 2)) throw Error(path + ": truncated .npy header");
    headerLen = b[0] | (b[1] << 8);
  } else if (version[0] == 2 || version[0] == 3) {
    unsigned char b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) throw Error(path + ": truncated .npy header");
    headerLen = b[0] | (b[1] << 8) | (b[2] << 16) | (uint32_t(b[3]) << 24);
  } else {
    throw Error(path + ": unsupported .npy version " + std::to_string(version[0]));
  }
  if (headerLen > (1u << 20)) throw Error(path + ": .npy header too large");
  std::string header(headerLen, '\0');
  if (!in.read(header.data(), headerLen)) throw Error(path + ": truncated .npy header");

  std::string descr = headerField(header, "descr", path);
  if (descr.size() < 2) throw Error(path + ": malformed .npy dtype");
  descr = descr.substr(1, descr.size() - 2);  // strip quotes
  auto dtype = dtypeForDescr(descr);
  if (!dtype) throw Error(path + ": unsupported .npy dtype '" + descr + "'");
  if (headerField(header, "fortran_order", path) != "False")
    throw Error(path + ": Fortran-ordered .npy arrays are not supported (save with C order)");

  std::string shapeText = headerField(header, "shape", path);
  if (shapeText.size() < 2 || shapeText.front() != '(' || shapeText.back() != ')')
    throw Error(path + ": malformed .npy shape '" + shapeText + "'");
  Shape shape;
  std::string inner = shapeText.substr(1, shapeText.size() - 2);
  std::stringstream ss(inner);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t a = item.find_first_not_of(' ');
    if (a == std::string::npos) continue;
    try {
      size_t used = 0;
      long long v = std::stoll(item.substr(a), &used);
      if (v < 0) throw Error(path + ": negative dimension in .npy shape");
      shape.push_back(v);
    } catch (const std::logic_error&) {
      throw Error(path + ": malformed .npy shape " + shapeText);
    }
  }
  // The data must be there before memory is allocated for it: a header may claim any shape.
  uint64_t bytes = dtypeSize(*dtype);
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes) || bytes > (uint64_t{1} << 62))
      throw Error(path + ": .npy shape " + shapeText + " is too large");
  }
  const std::streampos dataStart = in.tellg();
  if (dataStart >= 0 && in.seekg(0, std::ios::end)) {
    const uint64_t present = static_cast<uint64_t>(in.tellg() - dataStart);
    in.seekg(dataStart);
    if (present < bytes)
      throw Error(path + ": truncated .npy data (expected " + std::to_string(bytes) + " bytes, found " +
                  std::to_string(present) + ")");
  }
  in.clear();
  in.seekg(dataStart);
  Tensor t = Tensor::zeros(*dtype, shape);
  if (t.nbytes() && !in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes())))
    throw Error(path + ": truncated .npy data (expected " + std::to_string(t.nbytes()) + " bytes)");
  return t;
}

void writeNpy(const std::string& path, const Tensor& tensor) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(path + ": cannot write file", ErrorKind::Io);
  writeNpy(out, path, tensor);
}

void writeNpy(std::ostream& out, const std::string& path, const Tensor& tensor) {
  std::string shape = "(";
  for (size_t i = 0; i < tensor.shape().size(); ++i) {
    shape += std::to_string(tensor.shape()[i]);
    if (tensor.shape().size() == 1 || i + 1 < tensor.shape().size()) shape += ",";
    if (i + 1 < tensor.shape().size()) shape += " ";
  }
  shape += ")";
  std::string header = "{'descr': '" + descrFor(tensor.dtype()) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Version 1.0 has a 2-byte header length; longer headers (thousands of dimensions) need 2.0.
  const bool v2 = 10 + header.size() + 1 + 63 > 0xffff;
  const size_t prefix = v2 ? 12 : 10;
  size_t total = prefix + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  out.write(kMagic, 6);
  const char version[2] = {static_cast<char>(v2 ? 2 : 1), 0};
  out.write(version, 2);
  unsigned char len[4];
  for (int k = 0; k < 4; ++k) len[k] = static_cast<unsigned char>(header.size() >> (8 * k));
  out.write(reinterpret_cast<const char*>(len), v2 ? 4 : 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(tensor.raw()), static_cast<std::streamsize>(tensor.nbytes()));
  if (!out) throw Error(path + ": write failed", ErrorKind::Io);
}

}  // namespace kiln::runtime

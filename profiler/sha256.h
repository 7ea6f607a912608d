// SHA-256 (FIPS 180-4), for identifying model files by content in the session store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::profiler {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  /// The digest as 64 lower-case hex digits; the object must not be updated afterwards.
  std::string hexDigest();

 private:
  void block(const uint8_t* p);
  uint32_t m_h[8];
  uint8_t m_buf[64];
  size_t m_bufLen = 0;
  uint64_t m_totalBytes = 0;
};

std::string sha256Hex(const std::string& data);
/// Throws kiln::Error (Io) when the file cannot be read.
std::string sha256File(const std::string& path);

}  // namespace kiln::profiler

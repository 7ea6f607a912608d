#include "runtime/error.h"

#include <cstdio>
#include <cstdlib>

#include "runtime/kernel_abi.h"

namespace kiln {

void throwInternal(const char* file, int line, const char* cond, const std::string& msg) {
  throw InternalError("internal error: " + msg + " (" + cond + " failed at " + file + ":" +
                      std::to_string(line) + ")");
}

const char* errorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Usage: return "usage";
    case ErrorKind::InvalidModel: return "invalid-model";
    case ErrorKind::Unsupported: return "unsupported";
    case ErrorKind::InvalidInput: return "invalid-input";
    case ErrorKind::Io: return "io";
    case ErrorKind::KernelFault: return "kernel-fault";
    case ErrorKind::UnknownTarget: return "unknown-target";
    case ErrorKind::IncompatibleModule: return "incompatible-module";
    case ErrorKind::Store: return "store";
    case ErrorKind::Internal: return "internal";
  }
  return "internal";
}

std::string boundsFailureMessage(const std::string& kernel, const std::string& buffer, int64_t index,
                                 int64_t extent) {
  return "out-of-bounds access in kernel '" + kernel + "': buffer '" + buffer + "', index " +
         std::to_string(index) + ", extent " + std::to_string(extent);
}

}  // namespace kiln

extern "C" void kiln_bounds_fail(const char* kernel, const char* buffer, int64_t index, int64_t extent) {
  std::string line = "kiln: error: " + kiln::boundsFailureMessage(kernel ? kernel : "?", buffer ? buffer : "?",
                                                                  index, extent) + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  std::abort();
}

#include "runtime/error.h"

namespace kiln {

void throwInternal(const char* file, int line, const char* cond, const std::string& msg) {
  throw InternalError("internal error: " + msg + " (" + cond + " failed at " + file + ":" +
                      std::to_string(line) + ")");
}

}  // namespace kiln

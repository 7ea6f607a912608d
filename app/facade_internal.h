// Helpers shared by the façade's implementation files (app/facade*.cpp). Not a public header.
#pragma once

#include <chrono>
#include <exception>
#include <new>
#include <string>

#include "app/facade.h"

namespace kiln::app {

inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Runs `fn`, turning every exception into a Diagnostic: exceptions stop at the façade.
template <typename T, typename Fn>
Result<T> guarded(const std::string& context, Fn&& fn) {
  std::string prefix = context.empty() ? "" : context + ": ";
  try {
    return Result<T>(fn());
  } catch (const Error& e) {
    return Diagnostic{prefix + e.what(), e.kind()};
  } catch (const std::bad_alloc&) {
    return Diagnostic{prefix + "out of memory", ErrorKind::Internal};
  } catch (const std::exception& e) {
    return Diagnostic{prefix + "internal error: " + e.what(), ErrorKind::Internal};
  }
}

}  // namespace kiln::app

// Kiln's two error channels (shared by every layer, so it lives in the dependency-free runtime).
//
// - kiln::Error is a user-facing diagnostic: bad input, an unsupported operator, a malformed file.
//   Its message follows LLVM's style: lower-case start, no final period, says what and where.
//   Exceptions of this type stop at the façade (app/), which turns them into one-line errors.
// - KILN_ASSERT is for broken internal invariants; it throws kiln::InternalError with the source
//   location so a bug is reported with context instead of crashing the process.
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

/// What went wrong, coarsely, so front ends can map failures to distinct exit codes.
enum class ErrorKind {
  Usage = 2,        // bad command-line or API arguments
  InvalidModel = 3, // the model file cannot be read or is not a model
  Unsupported = 4,  // a construct Kiln cannot compile (names the operator)
  InvalidInput = 5, // inputs of the wrong count, shape, dtype or format
  Io = 6,           // a file cannot be opened or written
  Internal = 70,    // a broken invariant inside Kiln
};

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message, ErrorKind kind = ErrorKind::InvalidInput)
      : std::runtime_error(std::move(message)), m_kind(kind) {}
  ErrorKind kind() const { return m_kind; }

 private:
  ErrorKind m_kind;
};

class InternalError : public Error {
 public:
  explicit InternalError(std::string message) : Error(std::move(message), ErrorKind::Internal) {}
};

[[noreturn]] void throwInternal(const char* file, int line, const char* cond, const std::string& msg);

}  // namespace kiln

#define KILN_ASSERT(cond, msg)                                               \
  do {                                                                       \
    if (!(cond)) ::kiln::throwInternal(__FILE__, __LINE__, #cond, (msg));    \
  } while (0)

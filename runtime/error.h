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

/// What went wrong, coarsely, so front ends can map failures to distinct exit codes. The values
/// are the `kiln` command's exit codes and the C API's KilnStatus codes (runtime/c_api.h); they
/// never change once released. Every entry point answers bad input with one line
/// "error: WHAT: PROBLEM" and one of these:
///
///   code  kind                when
///   ----  ------------------  -------------------------------------------------------------------
///     0   -                   success (kiln doctor: the report was written, whatever it says)
///     2   Usage               bad command-line or API arguments
///     3   InvalidModel        not a model: empty, truncated, random bytes, a zip that is not
///                             TorchScript, a torch.save pickle, a corrupt exported module
///     4   Unsupported         an operator or construct Kiln cannot compile (named, with where),
///                             including control flow whose shapes depend on the data
///     5   InvalidInput        inputs of the wrong count, shape or dtype; a malformed or
///                             Fortran-ordered .npy; a tuning-records file without one valid line
///     6   Io                  a file cannot be found, opened, read or written
///     7   KernelFault         generated code crashed or hung in an isolated worker
///     8   UnknownTarget       a target string that does not parse or names an unknown CPU/feature
///     9   IncompatibleModule  an exported module of another format version, architecture or CPU
///    10   Store               a session store that is not a SQLite database, belongs to another
///                             application, is corrupt, or has a newer schema (never modified)
///    70   Internal            a broken invariant inside Kiln (a bug: please report it)
enum class ErrorKind {
  Usage = 2,        // bad command-line or API arguments
  InvalidModel = 3, // the model file cannot be read or is not a model
  Unsupported = 4,  // a construct Kiln cannot compile (names the operator)
  InvalidInput = 5, // inputs of the wrong count, shape, dtype or format
  Io = 6,           // a file cannot be opened or written
  KernelFault = 7,  // generated code crashed or hung in an isolated worker (measure-worker)
  UnknownTarget = 8,       // a target string Kiln cannot parse or whose CPU/features LLVM does not know
  IncompatibleModule = 9,  // an exported module of another format version, architecture or CPU
  Store = 10,              // a session store that is not one, is corrupt, or is newer than this Kiln
  Internal = 70,    // a broken invariant inside Kiln
};

/// "usage", "invalid-model", ... (for JSON and the exit-code table).
const char* errorKindName(ErrorKind kind);

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

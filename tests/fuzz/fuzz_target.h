// Shared by the libFuzzer targets (tests/fuzz/fuzz_*.cpp, built with -fsanitize=fuzzer by
// scripts/fuzz.sh) and the regression runner (regress_main.cpp, a ctest test in every build):
// one entry function per target that feeds bytes to a Kiln reader.
//
// An entry returns normally when Kiln accepted the input or rejected it with a user-facing
// kiln::Error (any kind but Internal): that is the contract of every reader. Anything else is a
// bug and escapes: an InternalError or another exception (rethrown as FuzzFailure naming it), or a
// crash. Under libFuzzer an escaping exception aborts the process, which it reports as a crash.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>

#include "runtime/error.h"

namespace kiln::fuzz {

struct FuzzFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void graphParser(const uint8_t* data, size_t size);  // fuzz_graph_parser.cpp
void npy(const uint8_t* data, size_t size);          // fuzz_npy.cpp
void records(const uint8_t* data, size_t size);      // fuzz_records.cpp
void torchscript(const uint8_t* data, size_t size);  // fuzz_torchscript.cpp

/// Runs `body`; a kiln::Error other than InternalError is an accepted rejection, every other
/// exception becomes a FuzzFailure with its message.
template <typename F>
void expectOnlyUserErrors(const char* target, F&& body) {
  try {
    body();
  } catch (const InternalError& e) {
    throw FuzzFailure(std::string(target) + ": internal error: " + e.what());
  } catch (const Error&) {
    // A user-facing rejection: what a reader must do with bad input.
  } catch (const FuzzFailure&) {
    throw;
  } catch (const std::exception& e) {
    throw FuzzFailure(std::string(target) + ": unexpected exception: " + e.what());
  }
}

/// A file of this process in /tmp (for readers that take a path), rewritten with `data` on every
/// call.
inline std::string writeScratchFile(const char* suffix, const uint8_t* data, size_t size) {
  std::string path = "/tmp/kiln_fuzz_" + std::to_string(getpid()) + suffix;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) throw FuzzFailure("cannot write " + path);
  return path;
}

}  // namespace kiln::fuzz

// One libFuzzer entry per fuzzer executable (KILN_FUZZER is defined only there).
#ifdef KILN_FUZZER
#define KILN_FUZZ_ENTRY(function)                                              \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {   \
    function(data, size);                                                      \
    return 0;                                                                  \
  }
#else
#define KILN_FUZZ_ENTRY(function)
#endif


// Runs a command line as a user would (a real process), capturing stdout, stderr and how it
// ended. Shared by the end-to-end tests of the `kiln` binary and the C example.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace kiln::testing_support {

/// True in the AddressSanitizer build (scripts/sanitize.sh), where everything runs several times
/// slower; deadlines that a healthy run must meet are widened there.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

struct Outcome {
  int exitCode = -1;      // -1 when the process did not exit normally
  bool signaled = false;  // killed by a signal (a crash)
  std::string out, err;
};

/// Runs `command` through the shell; stderr goes through `stderrFile` (any writable path).
inline Outcome runProcess(const std::string& command, const std::string& stderrFile) {
  Outcome o;
  FILE* p = popen((command + " 2>" + stderrFile).c_str(), "r");
  if (!p) return o;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) o.out.append(buf.data(), n);
  int status = pclose(p);
  o.signaled = WIFSIGNALED(status);
  o.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(stderrFile);
  o.err.assign(std::istreambuf_iterator<char>(e), {});
  return o;
}

}  // namespace kiln::testing_support

// Runs a command line as a user would (a real process), capturing stdout, stderr and how it
// ended. Shared by the end-to-end tests of the `kiln` binary and the C example, with the
// scratch folder those tests write modules into (removed when the run ends) and the paths of the
// `kiln` binary and the sample models their CMake target defines.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
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

/// This test program's scratch folder, `<tmp>/kiln_<program>_<pid>` (test_wasm's:
/// /tmp/kiln_test_wasm_1234), whether or not it exists yet.
inline std::string tempRootPath() {
  std::error_code ec;
  const std::string program = std::filesystem::read_symlink("/proc/self/exe", ec).filename().string();
  return (std::filesystem::temp_directory_path() /
          ("kiln_" + (program.empty() ? std::string("test") : program) + "_" + std::to_string(::getpid())))
      .string();
}

/// The scratch folder, created on first use and removed with everything in it when the test run
/// ends (a network's module alone is ~100 MB).
inline const std::string& tempRoot() {
  static const std::string root = [] {
    std::filesystem::create_directories(tempRootPath());
    return tempRootPath();
  }();
  return root;
}

class RemoveTempRoot : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(tempRootPath(), ec);
  }
};
inline ::testing::Environment* const g_removeTempRoot = ::testing::AddGlobalTestEnvironment(new RemoveTempRoot);

/// runProcess with stderr through the scratch folder.
inline Outcome runCommand(const std::string& command) { return runProcess(command, tempRoot() + "/stderr.txt"); }

#ifdef KILN_BINARY
/// The `kiln` command line with `args` (KILN_BINARY: the build's kiln).
inline std::string kiln(const std::string& args) { return std::string(KILN_BINARY) + " " + args; }
#endif

#ifdef KILN_MODELS_DIR
/// A sample model by name: "resnet18" and "ops/relu" are .pt files; a name with an extension
/// ("today/resnet18.onnx") is taken as it is.
inline std::string modelPath(const std::string& name) {
  const std::string path = std::string(KILN_MODELS_DIR) + "/" + name;
  return std::filesystem::path(name).has_extension() ? path : path + ".pt";
}
#endif

/// A file's bytes ("" when it cannot be read).
inline std::string readBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void writeBytes(const std::filesystem::path& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace kiln::testing_support

#include "profiler/context.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <set>
#include <thread>

#include "codegen/target.h"
#include "profiler/torch_baseline.h"

namespace kiln::profiler {
namespace {

std::string valueOf(const std::string& line) {
  size_t colon = line.find(':');
  if (colon == std::string::npos) return "";
  size_t start = line.find_first_not_of(" \t", colon + 1);
  return start == std::string::npos ? "" : line.substr(start);
}

}  // namespace

std::string cpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return valueOf(line);
  return "unknown";
}

int physicalCoreCount() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, package = "0";
  std::set<std::pair<std::string, std::string>> cores;
  while (std::getline(in, line)) {
    if (line.rfind("physical id", 0) == 0) package = valueOf(line);
    if (line.rfind("core id", 0) == 0) cores.emplace(package, valueOf(line));
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::string utcNow() {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

RunContext hostContext() {
  RunContext c;
  c.cpu = cpuModelName();
  c.physicalCores = physicalCoreCount();
  c.hardwareThreads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  c.torchVersion = torchVersion();
  c.llvmVersion = codegen::llvmVersion();
  c.blas = torchBlasLibrary();
  c.date = utcNow();
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0) c.hostname = host;
  return c;
}

}  // namespace kiln::profiler

#include "profiler/ceilings.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "codegen/llvm/jit.h"
#include "codegen/target.h"
#include "core/lower/peak_kernels.h"
#include "core/lower/schedule.h"
#include "core/tir/stmt.h"
#include "profiler/context.h"
#include "profiler/sha256.h"
#include "profiler/store.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"

namespace kiln::profiler {
namespace {

namespace tir = core::tir;
namespace lower = core::lower;

std::string readLine(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

/// "32K", "1024K", "32M", "65536" → bytes; 0 when unreadable.
int64_t parseSize(const std::string& text) {
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || v <= 0) return 0;
  switch (*end) {
    case 'K': case 'k': return v * 1024;
    case 'M': case 'm': return v * 1024 * 1024;
    case 'G': case 'g': return v * 1024 * 1024 * 1024;
    default: return v;
  }
}

/// CPUs in a list like "0-3,8,10-11".
int countCpus(const std::string& list) {
  int n = 0;
  std::stringstream ss(list);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part.empty()) continue;
    size_t dash = part.find('-');
    if (dash == std::string::npos) {
      ++n;
      continue;
    }
    int lo = std::atoi(part.substr(0, dash).c_str()), hi = std::atoi(part.substr(dash + 1).c_str());
    n += std::max(1, hi - lo + 1);
  }
  return n;
}

int hardwareThreads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

std::string cpuFlags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) return line.substr(line.find(':') == std::string::npos ? 0 : line.find(':') + 1);
  return "";
}

std::string levelName(int level) { return "L" + std::to_string(level); }

/// The runtime pool at `threads` while alive, the previous count afterwards.
class PoolThreads {
 public:
  explicit PoolThreads(int threads) : m_previous(runtime::numThreads()) { runtime::setNumThreads(threads); }
  ~PoolThreads() { runtime::setNumThreads(m_previous); }
  PoolThreads(const PoolThreads&) = delete;
  PoolThreads& operator=(const PoolThreads&) = delete;

 private:
  int m_previous;
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Seconds per call of `fn`: calls per run grown until a run lasts `targetSeconds`, the best of
/// `repeats` runs (after one untimed call).
double bestSecondsPerCall(KilnKernelFn fn, void* const* args, const CeilingOptions& options) {
  fn(args);
  double start = now();
  fn(args);
  double once = std::max(now() - start, 1e-7);
  int64_t number = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(options.targetSeconds / once)));
  double best = 1e30;
  for (int r = 0; r < std::max(1, options.repeats); ++r) {
    double t0 = now();
    for (int64_t i = 0; i < number; ++i) fn(args);
    best = std::min(best, (now() - t0) / static_cast<double>(number));
  }
  return best;
}

struct AlignedFloats {
  explicit AlignedFloats(int64_t n) : size(n) {
    size_t bytes = (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64;
    data.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    if (!data) throw Error("cannot allocate " + std::to_string(bytes) + " bytes for the bandwidth triad", ErrorKind::Internal);
    std::fill(data.get(), data.get() + n, 1.0f);
  }
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data;
  int64_t size;
};

}  // namespace

const BandwidthCeiling* MachineCeilings::level(const std::string& name) const {
  for (const auto& b : bandwidth)
    if (b.level == name) return &b;
  return nullptr;
}

std::vector<CacheLevel> hostCaches() {
  std::vector<CacheLevel> out;
  namespace fs = std::filesystem;
  fs::path dir("/sys/devices/system/cpu/cpu0/cache");
  std::error_code ec;
  if (fs::is_directory(dir, ec)) {
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().filename().string().rfind("index", 0) != 0) continue;
      std::string type = readLine(entry.path() / "type");
      if (type != "Data" && type != "Unified") continue;
      CacheLevel c;
      c.level = std::atoi(readLine(entry.path() / "level").c_str());
      c.sizeBytes = parseSize(readLine(entry.path() / "size"));
      c.sharedBy = std::max(1, countCpus(readLine(entry.path() / "shared_cpu_list")));
      if (c.level >= 1 && c.sizeBytes > 0) out.push_back(c);
    }
  }
  if (out.empty()) {
    const std::pair<int, int> names[] = {{1, _SC_LEVEL1_DCACHE_SIZE}, {2, _SC_LEVEL2_CACHE_SIZE}, {3, _SC_LEVEL3_CACHE_SIZE}};
    for (auto [level, name] : names) {
      long size = sysconf(name);
      if (size > 0) out.push_back(CacheLevel{level, size, level == 3 ? hardwareThreads() : 1});
    }
  }
  std::sort(out.begin(), out.end(), [](const CacheLevel& a, const CacheLevel& b) { return a.level < b.level; });
  return out;
}

std::string machineKey() {
  std::string text = cpuModelName() + "\n" + cpuFlags() + "\n" + std::to_string(hardwareThreads());
  for (const CacheLevel& c : hostCaches())
    text += "\nL" + std::to_string(c.level) + ":" + std::to_string(c.sizeBytes) + "/" + std::to_string(c.sharedBy);
  return sha256Hex(text);
}

MachineCeilings measureCeilings(int threads, const CeilingOptions& options) {
  if (threads < 1) throw Error("the ceilings need a thread count of at least 1", ErrorKind::Usage);
  MachineCeilings m;
  m.machineKey = machineKey();
  m.cpu = cpuModelName();
  m.threads = threads;
  m.measuredAt = utcNow();
  const codegen::Target host = codegen::Target::parse("llvm");
  const int lanes = lower::lowerOptionsFor(host.cpu, host.features).vectorLanes;
  m.vectorBits = lanes * 32;
  PoolThreads pool(threads);

  // Peak: registers only.
  const int chains = lanes >= 16 ? 24 : 12;
  const int64_t iters = int64_t{1} << 16;
  {
    tir::PrimFunc f = lower::fmaPeakKernel(lanes, chains, iters, threads);
    auto lib = codegen::JitLibrary::compile({f}, host);
    std::vector<float> out(static_cast<size_t>(threads) * lanes);
    void* args[] = {out.data()};
    double seconds = bestSecondsPerCall(lib->lookup(f.name), args, options);
    m.peakGflops = 2.0 * lanes * chains * static_cast<double>(iters) * threads / seconds * 1e-9;
  }

  // Bandwidth: one working set per level.
  int hw = hardwareThreads();
  std::vector<BandwidthCeiling> levels;
  int64_t largest = 0;
  for (const CacheLevel& c : hostCaches()) {
    int instances = std::max(1, hw / c.sharedBy);
    BandwidthCeiling b;
    b.level = levelName(c.level);
    b.capacityBytes = c.sizeBytes * std::min(threads, instances);
    b.workingSetBytes = b.capacityBytes / 2;
    largest = std::max(largest, b.capacityBytes);
    levels.push_back(b);
  }
  BandwidthCeiling dram;
  dram.level = "DRAM";
  dram.workingSetBytes = std::max<int64_t>(4 * largest, int64_t{64} << 20);
  levels.push_back(dram);

  const double bytesPerCall = 64.0 * 1024 * 1024;  // traffic of one kernel call (several passes)
  for (BandwidthCeiling& b : levels) {
    int64_t perThread = b.workingSetBytes / threads;
    int64_t m1 = std::max<int64_t>(lanes, perThread / 12 / lanes * lanes);
    double callBytes = 12.0 * static_cast<double>(m1) * threads;
    int64_t passes = std::max<int64_t>(1, static_cast<int64_t>(bytesPerCall / callBytes));
    tir::PrimFunc f = lower::triadKernel(lanes, m1, passes, threads);
    auto lib = codegen::JitLibrary::compile({f}, host);
    AlignedFloats mem(int64_t{threads} * 3 * m1);
    void* args[] = {mem.data.get()};
    double seconds = bestSecondsPerCall(lib->lookup(f.name), args, options);
    b.workingSetBytes = 12 * m1 * threads;  // what was used: three arrays of m1 floats per thread
    b.gbPerSecond = callBytes * static_cast<double>(passes) / seconds * 1e-9;
  }
  m.bandwidth = std::move(levels);

  std::ostringstream method;
  method << "Kiln JIT (" << host.cpu << "): FMA f32x" << lanes << ", " << chains << " chains; triad f32x" << lanes
         << " at half of each cache's capacity, DRAM at " << (m.bandwidth.back().workingSetBytes >> 20)
         << " MiB; best of " << options.repeats << " runs of " << options.targetSeconds * 1e3 << " ms";
  m.method = method.str();
  return m;
}

CeilingsLookup ceilingsFor(Store* store, int threads, bool remeasure, const MeasureCeilingsFn& measure) {
  CeilingsLookup r;
  std::string key = machineKey();
  if (store && !remeasure) {
    if (auto stored = store->latestCeilings(key, threads)) {
      r.ceilings = std::move(*stored);
      r.reused = true;
      return r;
    }
  }
  r.ceilings = measure(threads);
  r.ceilings.machineKey = key;
  if (store) {
    r.ceilings.id = store->transaction([&] { return store->addCeilings(r.ceilings); });
  }
  return r;
}

CeilingsLookup ceilingsFor(Store* store, int threads, bool remeasure) {
  return ceilingsFor(store, threads, remeasure, [](int t) { return measureCeilings(t); });
}

}  // namespace kiln::profiler

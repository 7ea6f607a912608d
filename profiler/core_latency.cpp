// Core-to-core round trips between two pinned threads; see core_latency.h.
#include "profiler/core_latency.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace kiln::profiler {
namespace {

using Clock = std::chrono::steady_clock;

bool pinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

/// The cache line the two threads pass: the pinger writes an odd value, the ponger answers with
/// the next even one. Alone on its line so nothing else travels with it.
struct alignas(128) Line {
  std::atomic<int64_t> value{0};
  std::atomic<bool> stop{false};
};

/// How long a side waits for the other before giving up (the other CPU was taken away).
constexpr auto kAnswerTimeout = std::chrono::milliseconds(50);

/// Spins until `line` holds `want`; false after kAnswerTimeout or when told to stop.
bool awaitValue(const Line& line, int64_t want) {
  auto deadline = Clock::now() + kAnswerTimeout;
  for (int spins = 0; line.value.load(std::memory_order_acquire) != want; ++spins) {
    if (line.stop.load(std::memory_order_relaxed)) return false;
    if ((spins & 1023) == 1023 && Clock::now() > deadline) return false;
  }
  return true;
}

}  // namespace

std::optional<CoreRoundTrip> measureCoreRoundTrip(double millis) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return std::nullopt;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.size() < 2) return std::nullopt;

  Line line;
  std::atomic<bool> pongerPinned{false}, pongerReady{false};
  std::thread ponger([&] {
    pongerPinned = pinTo(cpus[1]);
    pongerReady = true;
    for (int64_t next = 1; !line.stop.load(std::memory_order_relaxed); next += 2) {
      if (!awaitValue(line, next)) return;
      line.value.store(next + 1, std::memory_order_release);
    }
  });

  std::vector<double> blocks;  // ns per round trip, one per block of round trips
  bool ok = false;
  std::thread pinger([&] {
    while (!pongerReady) std::this_thread::yield();
    if (!pongerPinned || !pinTo(cpus[0])) return;
    constexpr int kBlock = 256;
    auto end = Clock::now() + std::chrono::duration<double, std::milli>(millis);
    int64_t value = 0;
    do {
      auto start = Clock::now();
      for (int i = 0; i < kBlock; ++i) {
        line.value.store(value + 1, std::memory_order_release);
        if (!awaitValue(line, value + 2)) return;
        value += 2;
      }
      blocks.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kBlock);
    } while (Clock::now() < end || blocks.size() < 3);
    ok = true;
  });
  pinger.join();
  line.stop = true;
  ponger.join();
  if (!ok || blocks.empty()) return std::nullopt;
  // The median block: a block the scheduler interrupted (a timer tick, another tenant) is an outlier.
  std::nth_element(blocks.begin(), blocks.begin() + static_cast<std::ptrdiff_t>(blocks.size() / 2), blocks.end());
  return CoreRoundTrip{blocks[blocks.size() / 2], cpus[0], cpus[1]};
}

bool placementChanged(const std::vector<double>& roundTripNs, double ratio) {
  if (roundTripNs.size() < 2) return false;
  auto [lo, hi] = std::minmax_element(roundTripNs.begin(), roundTripNs.end());
  return *lo > 0 && *hi / *lo > ratio;
}

}  // namespace kiln::profiler

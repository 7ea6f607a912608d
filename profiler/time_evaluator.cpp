#include "profiler/time_evaluator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace kiln::profiler {
namespace {
double nowMs() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace

double medianOf(std::vector<double> s) {
  if (s.empty()) return 0;
  std::sort(s.begin(), s.end());
  size_t n = s.size();
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

void summarize(Timing& t) {
  if (t.samplesMs.empty()) {
    t.minMs = t.maxMs = t.medianMs = t.meanMs = t.stddevMs = 0;
    return;
  }
  std::vector<double> s = t.samplesMs;
  std::sort(s.begin(), s.end());
  t.minMs = s.front();
  t.maxMs = s.back();
  t.medianMs = medianOf(s);
  size_t n = s.size();
  t.meanMs = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(n);
  double var = 0;
  for (double v : s) var += (v - t.meanMs) * (v - t.meanMs);
  t.stddevMs = n > 1 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0;
}

double quantileOf(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(samples.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (samples[hi] - samples[lo]) * (pos - static_cast<double>(lo));
}

Spread spreadOf(const Timing& timing, std::vector<double> processMedianMs, bool processesDisagree) {
  Spread s;
  s.medianMs = timing.medianMs;
  s.q1Ms = quantileOf(timing.samplesMs, 0.25);
  s.q3Ms = quantileOf(timing.samplesMs, 0.75);
  s.minMs = timing.minMs;
  s.maxMs = timing.maxMs;
  s.meanMs = timing.meanMs;
  s.stddevMs = timing.stddevMs;
  s.samples = static_cast<int>(timing.samplesMs.size());
  s.number = timing.number;
  s.processMedianMs = std::move(processMedianMs);
  s.processesDisagree = processesDisagree;
  return s;
}

Timing timingFromSamples(std::vector<double> samplesMs, int number) {
  Timing t;
  t.samplesMs = std::move(samplesMs);
  t.number = number;
  summarize(t);
  return t;
}

void evictFromCaches(const void* data, size_t bytes) {
  if (!data || bytes == 0) return;
  constexpr uintptr_t kLine = 64;
  uintptr_t first = reinterpret_cast<uintptr_t>(data) & ~(kLine - 1);
  uintptr_t end = reinterpret_cast<uintptr_t>(data) + bytes;
#if defined(__x86_64__)
  // clflushopt where the processor has it (CPUID leaf 7, EBX bit 23): unordered, so the lines
  // are flushed in parallel; clflush (every x86-64) one after the other.
  static const bool optimized = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 23)) != 0;
  }();
  for (uintptr_t line = first; line < end; line += kLine) {
    if (optimized)
      asm volatile("clflushopt (%0)" ::"r"(line) : "memory");
    else
      asm volatile("clflush (%0)" ::"r"(line) : "memory");
  }
  asm volatile("mfence" ::: "memory");
#elif defined(__aarch64__)
  for (uintptr_t line = first; line < end; line += kLine) asm volatile("dc civac, %0" ::"r"(line) : "memory");
  asm volatile("dsb ish" ::: "memory");
#else
  (void)first;
  (void)end;
#endif
}

namespace {

/// The hook run before each call of callable `index` (empty without TimingOptions::beforeEachCall).
std::function<void()> hookFor(const TimingOptions& options, size_t index) {
  if (!options.beforeEachCall) return {};
  return [&options, index] { options.beforeEachCall(index); };
}

/// Milliseconds `number` calls of fn take; with a hook run before each call, only the calls are
/// timed.
double callsMs(const std::function<void()>& fn, int number, const std::function<void()>& before) {
  if (!before) {
    double start = nowMs();
    for (int i = 0; i < number; ++i) fn();
    return nowMs() - start;
  }
  double total = 0;
  for (int i = 0; i < number; ++i) {
    before();
    double start = nowMs();
    fn();
    total += nowMs() - start;
  }
  return total;
}

/// Warm-up, then `number` scaled until a repeat lasts minRepeatMs (as in Google Benchmark).
void warmAndCalibrate(const std::function<void()>& fn, const TimingOptions& options, size_t index, Timing& t,
                      const std::function<bool()>& overBudget) {
  const std::function<void()> before = hookFor(options, index);
  t.noisyCv = options.noisyCv;
  t.warmup = options.warmup;
  for (int i = 0; i < options.warmup && !overBudget(); ++i) callsMs(fn, 1, before);
  t.number = std::max(1, options.number);
  if (options.minRepeatMs <= 0) return;
  for (;;) {
    double elapsed = callsMs(fn, t.number, before);
    if (elapsed >= options.minRepeatMs || t.number >= (1 << 20) || overBudget()) break;
    double scale = elapsed > 0 ? options.minRepeatMs / elapsed * 1.2 : 10.0;
    t.number = std::max(t.number + 1, static_cast<int>(t.number * std::min(scale, 10.0)));
  }
}

void timeRepeat(const std::function<void()>& fn, Timing& t, const std::function<void()>& before) {
  t.samplesMs.push_back(callsMs(fn, t.number, before) / t.number);
}

}  // namespace

Timing timeIt(const std::function<void()>& fn, const TimingOptions& options) {
  const double begin = nowMs();
  auto overBudget = [&] { return options.budgetMs > 0 && nowMs() - begin > options.budgetMs; };
  Timing t;
  warmAndCalibrate(fn, options, 0, t, overBudget);
  const std::function<void()> before = hookFor(options, 0);
  for (int r = 0; r < std::max(1, options.repeat); ++r) {
    if (r > 0 && overBudget()) {
      t.budgetExceeded = true;
      break;
    }
    timeRepeat(fn, t, before);
  }
  t.elapsedMs = nowMs() - begin;
  summarize(t);
  return t;
}

std::vector<Timing> timeSideBySide(const std::vector<std::function<void()>>& fns, const TimingOptions& options) {
  const double begin = nowMs();
  auto overBudget = [&] { return options.budgetMs > 0 && nowMs() - begin > options.budgetMs; };
  std::vector<Timing> out(fns.size());
  std::vector<std::function<void()>> before;
  for (size_t k = 0; k < fns.size(); ++k) {
    warmAndCalibrate(fns[k], options, k, out[k], overBudget);
    before.push_back(hookFor(options, k));
  }
  for (int r = 0; r < std::max(1, options.repeat); ++r) {
    if (r > 0 && overBudget()) {
      for (Timing& t : out) t.budgetExceeded = true;
      break;
    }
    for (size_t k = 0; k < fns.size(); ++k) {
      // Untimed: the previous callable's data left the caches.
      if (fns.size() > 1) callsMs(fns[k], 1, before[k]);
      timeRepeat(fns[k], out[k], before[k]);
    }
  }
  for (Timing& t : out) {
    t.elapsedMs = nowMs() - begin;
    summarize(t);
  }
  return out;
}

}  // namespace kiln::profiler

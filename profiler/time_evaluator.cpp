#include "profiler/time_evaluator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace kiln::profiler {
namespace {
double nowMs() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace

void summarize(Timing& t) {
  if (t.samplesMs.empty()) return;
  std::vector<double> s = t.samplesMs;
  std::sort(s.begin(), s.end());
  t.minMs = s.front();
  t.maxMs = s.back();
  size_t n = s.size();
  t.medianMs = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  t.meanMs = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(n);
  double var = 0;
  for (double v : s) var += (v - t.meanMs) * (v - t.meanMs);
  t.stddevMs = n > 1 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0;
}

Timing timeIt(const std::function<void()>& fn, const TimingOptions& options) {
  for (int i = 0; i < options.warmup; ++i) fn();
  Timing t;
  t.number = std::max(1, options.number);
  if (options.minRepeatMs > 0) {
    for (;;) {
      double start = nowMs();
      for (int i = 0; i < t.number; ++i) fn();
      double elapsed = nowMs() - start;
      if (elapsed >= options.minRepeatMs || t.number >= (1 << 20)) break;
      double scale = elapsed > 0 ? options.minRepeatMs / elapsed * 1.2 : 10.0;
      t.number = std::max(t.number + 1, static_cast<int>(t.number * std::min(scale, 10.0)));
    }
  }
  for (int r = 0; r < std::max(1, options.repeat); ++r) {
    double start = nowMs();
    for (int i = 0; i < t.number; ++i) fn();
    t.samplesMs.push_back((nowMs() - start) / t.number);
  }
  summarize(t);
  return t;
}

}  // namespace kiln::profiler

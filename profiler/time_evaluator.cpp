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

Timing timingFromSamples(std::vector<double> samplesMs, int number) {
  Timing t;
  t.samplesMs = std::move(samplesMs);
  t.number = number;
  summarize(t);
  return t;
}

Timing timeIt(const std::function<void()>& fn, const TimingOptions& options) {
  const double begin = nowMs();
  auto overBudget = [&] { return options.budgetMs > 0 && nowMs() - begin > options.budgetMs; };
  Timing t;
  t.noisyCv = options.noisyCv;
  t.warmup = options.warmup;
  for (int i = 0; i < options.warmup && !overBudget(); ++i) fn();
  t.number = std::max(1, options.number);
  if (options.minRepeatMs > 0) {
    // Scale `number` until a repeat lasts minRepeatMs; the scaling runs are timed repeats too
    // once they are long enough, as in Google Benchmark.
    for (;;) {
      double start = nowMs();
      for (int i = 0; i < t.number; ++i) fn();
      double elapsed = nowMs() - start;
      if (elapsed >= options.minRepeatMs || t.number >= (1 << 20) || overBudget()) break;
      double scale = elapsed > 0 ? options.minRepeatMs / elapsed * 1.2 : 10.0;
      t.number = std::max(t.number + 1, static_cast<int>(t.number * std::min(scale, 10.0)));
    }
  }
  for (int r = 0; r < std::max(1, options.repeat); ++r) {
    if (r > 0 && overBudget()) {
      t.budgetExceeded = true;
      break;
    }
    double start = nowMs();
    for (int i = 0; i < t.number; ++i) fn();
    t.samplesMs.push_back((nowMs() - start) / t.number);
  }
  t.elapsedMs = nowMs() - begin;
  summarize(t);
  return t;
}

}  // namespace kiln::profiler

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

namespace {

/// Warm-up, then `number` scaled until a repeat lasts minRepeatMs (as in Google Benchmark).
void warmAndCalibrate(const std::function<void()>& fn, const TimingOptions& options, Timing& t,
                      const std::function<bool()>& overBudget) {
  t.noisyCv = options.noisyCv;
  t.warmup = options.warmup;
  for (int i = 0; i < options.warmup && !overBudget(); ++i) fn();
  t.number = std::max(1, options.number);
  if (options.minRepeatMs <= 0) return;
  for (;;) {
    double start = nowMs();
    for (int i = 0; i < t.number; ++i) fn();
    double elapsed = nowMs() - start;
    if (elapsed >= options.minRepeatMs || t.number >= (1 << 20) || overBudget()) break;
    double scale = elapsed > 0 ? options.minRepeatMs / elapsed * 1.2 : 10.0;
    t.number = std::max(t.number + 1, static_cast<int>(t.number * std::min(scale, 10.0)));
  }
}

void timeRepeat(const std::function<void()>& fn, Timing& t) {
  double start = nowMs();
  for (int i = 0; i < t.number; ++i) fn();
  t.samplesMs.push_back((nowMs() - start) / t.number);
}

}  // namespace

Timing timeIt(const std::function<void()>& fn, const TimingOptions& options) {
  const double begin = nowMs();
  auto overBudget = [&] { return options.budgetMs > 0 && nowMs() - begin > options.budgetMs; };
  Timing t;
  warmAndCalibrate(fn, options, t, overBudget);
  for (int r = 0; r < std::max(1, options.repeat); ++r) {
    if (r > 0 && overBudget()) {
      t.budgetExceeded = true;
      break;
    }
    timeRepeat(fn, t);
  }
  t.elapsedMs = nowMs() - begin;
  summarize(t);
  return t;
}

std::vector<Timing> timeSideBySide(const std::vector<std::function<void()>>& fns, const TimingOptions& options) {
  const double begin = nowMs();
  auto overBudget = [&] { return options.budgetMs > 0 && nowMs() - begin > options.budgetMs; };
  std::vector<Timing> out(fns.size());
  for (size_t k = 0; k < fns.size(); ++k) warmAndCalibrate(fns[k], options, out[k], overBudget);
  for (int r = 0; r < std::max(1, options.repeat); ++r) {
    if (r > 0 && overBudget()) {
      for (Timing& t : out) t.budgetExceeded = true;
      break;
    }
    for (size_t k = 0; k < fns.size(); ++k) {
      if (fns.size() > 1) fns[k]();  // untimed: the previous callable's data left the caches
      timeRepeat(fns[k], out[k]);
    }
  }
  for (Timing& t : out) {
    t.elapsedMs = nowMs() - begin;
    summarize(t);
  }
  return out;
}

}  // namespace kiln::profiler

// Timing of a repeated callable, after Google Benchmark's runner: warm-up, `number` calls per
// repeat, `repeat` repeats, with `number` grown until one repeat lasts at least `minRepeatMs`.
// Every repeat's per-call time is kept (the raw record); min/median/mean/max/stddev/CV are
// derived from it, and `Spread` (with the quartiles) is what every view and report shows of it.
// An optional time budget stops the repeats early (the result says so) so a sweep can give up on
// a backend cleanly instead of running for hours.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace kiln::profiler {

struct TimingOptions {
  int warmup = 3;
  int number = 1;
  int repeat = 10;
  double minRepeatMs = 0.0;
  /// > 0: stop starting new repeats once this much time (warm-up included) has been spent.
  double budgetMs = 0.0;
  /// Coefficient of variation above which a result is flagged noisy.
  double noisyCv = 0.05;
  /// Run before every call (warm-up and calibration too) with the callable's index (0 in
  /// timeIt, its position in timeSideBySide), and not timed: each call is then timed alone. The
  /// tuner evicts a kernel's operands from the caches here (evictFromCaches).
  std::function<void(size_t)> beforeEachCall;
};

/// Writes back and drops from every cache level the lines holding [data, data + bytes)
/// (clflushopt on x86-64, dc civac on AArch64, nothing elsewhere), so that the next access comes
/// from memory, as a layer's weights do in a model too large for the caches.
void evictFromCaches(const void* data, size_t bytes);

struct Timing {
  std::vector<double> samplesMs;  // per-call time of each repeat (raw record)
  int number = 1;                 // calls per repeat actually used
  int warmup = 0;
  double minMs = 0, medianMs = 0, meanMs = 0, maxMs = 0, stddevMs = 0;
  double noisyCv = 0.05;
  bool budgetExceeded = false;  // fewer repeats than asked because of TimingOptions::budgetMs
  double elapsedMs = 0;         // wall time spent, warm-up included

  double cv() const { return meanMs > 0 ? stddevMs / meanMs : 0; }
  bool noisy() const { return samplesMs.size() > 1 && cv() > noisyCv; }
};

Timing timeIt(const std::function<void()>& fn, const TimingOptions& options = {});
/// Times several callables side by side on a shared, noisy machine: each is warmed up and gets
/// its own `number`, then their repeats alternate (one untimed call after each switch, so every
/// repeat starts warm), and a burst of load lands on all of them rather than on whichever ran
/// then. One Timing per callable, in order; `options.budgetMs` bounds the whole run.
std::vector<Timing> timeSideBySide(const std::vector<std::function<void()>>& fns, const TimingOptions& options = {});
/// Fills the derived statistics from samplesMs.
void summarize(Timing& timing);
/// A Timing whose statistics are derived from the given samples.
Timing timingFromSamples(std::vector<double> samplesMs, int number = 1);
/// Median of a sample set (0 when empty).
double medianOf(std::vector<double> samples);
/// The q-quantile (0..1) of a sample set, interpolated between order statistics (0 when empty).
double quantileOf(std::vector<double> samples, double q);

/// The spread of one measured result as every view and report shows it: the Timing's statistics,
/// its quartiles and, when it was measured in several worker processes (profiler/bench.h), their
/// medians.
struct Spread {
  double medianMs = 0, q1Ms = 0, q3Ms = 0, minMs = 0, maxMs = 0, meanMs = 0, stddevMs = 0;
  int samples = 0;                      // timed repeats
  int number = 1;                       // calls per repeat
  std::vector<double> processMedianMs;  // one per worker process
  bool processesDisagree = false;       // those medians differ by more than 10 %
};
/// The spread of `timing` (quartiles from its samples), with the medians of the worker processes
/// that measured it and whether they disagree.
Spread spreadOf(const Timing& timing, std::vector<double> processMedianMs = {},
              bool processesDisagree = false);

}  // namespace kiln::profiler

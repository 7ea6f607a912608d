// Timing of a repeated callable: warm-up, `number` calls per repeat, `repeat` repeats, with
// `number` grown until one repeat lasts at least `minRepeatMs`. Keeps every repeat's per-call
// time (the raw record) and derives min/median/mean/max/stddev/CV from it.
#pragma once

#include <functional>
#include <vector>

namespace kiln::profiler {

struct TimingOptions {
  int warmup = 3;
  int number = 1;
  int repeat = 10;
  double minRepeatMs = 0.0;
};

struct Timing {
  std::vector<double> samplesMs;  // per-call time of each repeat
  int number = 1;                 // calls per repeat actually used
  double minMs = 0, medianMs = 0, meanMs = 0, maxMs = 0, stddevMs = 0;
  double cv() const { return meanMs > 0 ? stddevMs / meanMs : 0; }
  bool noisy() const { return cv() > 0.1; }
};

Timing timeIt(const std::function<void()>& fn, const TimingOptions& options = {});
/// Fills the derived statistics from samplesMs.
void summarize(Timing& timing);

}  // namespace kiln::profiler

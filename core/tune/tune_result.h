// What tuning reports: each task's identity, its trials and its summary (best and default
// schedules). Filled by the tuning loop (tune_loop.h); a light header of plain values, so the
// façade and the workbench can hold results without the compiler's headers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::core::tune {

/// One tuning task as reports show it: a distinct workload among the model's kernels.
struct TuneTaskInfo {
  std::string name;         // the kernel's name, "fused_conv2d_nchwc_add_relu_3"
  std::string workloadKey;  // what records are keyed by
  std::string op;           // the anchor op ("conv2d_nchwc", "dense", ...)
  int weight = 1;           // calls per inference that run it
  double flops = 0;         // per call
  int64_t spaceSize = 0;    // valid configurations
};

struct TuneTrial {
  int index = 0;           // within its task, 1-based
  std::string knobs;       // "mi=7,oc_vecs=2,po=1"
  double ms = 0;           // median per call; 0 when it failed
  double gflops = 0;
  std::string error;       // "", "timeout", "crashed (signal 11)", "wrong result (max diff 3.1)", ...
  bool fromRecords = false;  // loaded from earlier records instead of measured now
};

struct TuneTaskResult {
  TuneTaskInfo info;
  std::string defaultKnobs;
  double defaultMs = 0;
  std::string bestKnobs;
  double bestMs = 0;
  double bestGflops = 0;
  int measured = 0, skipped = 0, errors = 0;  // skipped: already in the records
  int confirmed = 0;  // configurations the confirmation round timed side by side (0: none ran);
                      //   defaultMs and bestMs then come from that round
  std::vector<TuneTrial> trials;  // in measurement order
};

/// Where the loop is, for progress bars.
struct TuneLoopProgress {
  int taskIndex = 0, numTasks = 0;  // 0-based task being tuned
  std::string taskName;
  int taskTrials = 0, taskBudget = 0;  // measured or from records / planned, this task
  int totalTrials = 0, totalBudget = 0;  // measured now, all tasks
  int errors = 0;                      // failed candidates so far (all tasks)
  double bestGflops = 0, defaultGflops = 0;  // this task's
  std::string message;
};

}  // namespace kiln::core::tune

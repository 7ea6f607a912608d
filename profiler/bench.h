// Side-by-side measurement of several backends, each in worker processes of its own.
//
// Why processes: two runtimes' thread pools in one timed process (Kiln's spinning workers and
// libtorch's OpenMP team) fight over the cores; at 2 threads on this 2-core machine that inflated
// compiled PyTorch's time 1.2–5.4× against the same backend alone. Here every backend runs in
// its own `kiln bench-worker` (or a Python worker for torch.compile), and the coordinator, which
// runs nothing itself, alternates their repeats round-robin:
//
//   setup     all workers load/compile in parallel and run once (their outputs go to .npy files)
//   warm-up   each backend's `warmup` calls, then `number` is grown until a repeat lasts at
//             least minRepeatMs (per backend, as Google Benchmark does), then whole repeats
//             until each process has run the model for at least minWarmupMs
//   rounds    for each backend, for each of its processes: wait until every other worker's
//             threads are parked (no thread of theirs runnable), then one untimed call and one
//             timed repeat of `number` calls, timed inside the worker; before each round and
//             after the last, with every worker parked, a probe of the core-to-core latency
//             (core_latency.h: the host may move this machine's CPUs, and every runtime's speed
//             moves with it)
//
// so a slow phase of the shared machine falls on all backends alike, and while one worker
// measures the others are blocked on their stdin with their pools asleep. With `processes` > 1
// each backend's repeats are spread over several fresh processes, and a backend whose
// processes' medians differ by more than `disagreeRatio` is flagged (pyperf's view: one process
// is one sample of the code layout, memory placement and thread placement).
//
// A worker that fails, crashes, hangs or runs out of memory fails its own row only; the other
// rows go on. Protocol (JSON lines on the worker's stdin/stdout; other lines are ignored):
//
//   → {"op":"setup", ...the backend's own fields..., "output_dir":DIR}
//   ← {"event":"measuring"}                     optional: compiled; the run limit applies from now
//   ← {"event":"fault","signal":11,"kernel":K}  optional: from a fault handler, before dying
//   ← {"ok":true,"result":{"outputs":[npy paths],"first_ms":T, ...backend facts}}
//   | {"ok":false,"error":"...","status":"unavailable"|"failed"|"out-of-memory"}
//   → {"op":"run","warm":W,"number":N}         W untimed calls, then N calls timed together
//   ← {"ok":true,"ms":total ms of the N calls}
//   → {"op":"exit"} (or end of input)
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "profiler/records.h"

namespace kiln::profiler {

/// One row of a comparison: the program that serves it and the setup it is sent.
struct BenchBackend {
  std::string name;               // the row: "pytorch-eager", "kiln", "torch-compile", ...
  std::vector<std::string> argv;  // the worker's command line
  std::string setupJson;          // a JSON object; the engine adds "op" and "output_dir"
  std::string unavailable;        // non-empty: not started, the row is Unavailable with this reason
};

struct BenchOptions {
  int warmup = 3;
  int repeat = 15;  // timed repeats per backend, spread over its processes
  double minRepeatMs = 20;
  double minWarmupMs = 500;  // per process, untimed, before its first timed repeat
  int processes = 1;  // worker processes per backend
  double setupTimeoutSeconds = 600;  // loading and compiling, and the first run
  double runTimeoutSeconds = 60;     // one request of calls, after setup
  /// > 0: per backend; once its calls (untimed ones included) took this long, it gets no more
  /// repeats (Timing::budgetExceeded). A first run over the budget is a Timeout.
  double budgetSeconds = 0;
  double disagreeRatio = 1.10;  // max/min of the per-process medians above this flags the row
  double parkTimeoutMs = 200;   // how long to wait for the other workers' threads to sleep
  double placementProbeMs = 3;  // per core-to-core probe (core_latency.h); 0: no probes
  std::string workDir;          // where workers write their outputs (a folder per process)
  std::function<bool()> cancelled;               // polled often: true kills every worker
  std::function<void(const std::string&)> progress;  // one line per phase
};

struct BenchRow {
  std::string name;
  Status status = Status::Ok;
  std::string reason;
  bool kernelFault = false;              // a worker crashed or hung (not an error it reported)
  Timing timing;                         // every process's repeats pooled, in the order run
  std::vector<double> processMedianMs;   // one per process that finished
  std::vector<int> pids;                 // the row's worker processes
  bool processesDisagree = false;
  std::vector<std::string> outputs;      // .npy paths from the first process
  std::string resultJson;                // the first process's setup result (backend facts)
  bool ok() const { return status == Status::Ok; }
};

struct BenchResult {
  std::vector<BenchRow> rows;  // in the order of the backends
  bool cancelled = false;
  int parkWaits = 0;           // switches that had to wait for another worker's threads to sleep
  int parkTimeouts = 0;        // switches whose wait ran out (a thread stayed runnable)
  double setupSeconds = 0;
  /// Core-to-core round trips (core_latency.h), probed with every worker parked before each
  /// round and after the last; empty when the machine has one CPU for us. They differ when the
  /// host moved this machine's CPUs during the run (placementChanged).
  std::vector<double> coreRoundTripNs;
};

/// Measures the backends side by side (see above). Never throws for a backend's failure.
BenchResult runSideBySide(const std::vector<BenchBackend>& backends, const BenchOptions& options);

/// Worker side: serves the bench protocol on stdin/stdout, starting with `firstLine` when it is
/// not empty (a request already read). `setup` loads the backend the request names (throwing
/// kiln::Error), runs it once and writes its outputs; it returns the call to time and its result
/// object ({"outputs":[...],"first_ms":T,...}). Returns the exit code.
struct BenchWorkerSetup {
  std::function<void()> call;  // one inference
  std::string resultJson;
};
int serveBenchWorker(const std::function<BenchWorkerSetup(const std::string& setupJson)>& setup,
                     const std::string& firstLine = "");

/// True when no thread of process `pid` is runnable (state R) right now; false when one is or
/// the process cannot be read.
bool processParked(int pid);

}  // namespace kiln::profiler

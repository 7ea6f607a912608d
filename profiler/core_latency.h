// The machine's core-to-core latency as this process sees it now: two threads, pinned to two of
// the CPUs this thread may run on, pass a cache line back and forth.
//
// Why a benchmarking tool measures it: on a shared virtual machine the hypervisor decides which
// host cores the virtual CPUs run on, and it moves them. On this project's 2-vCPU EPYC machine a
// round trip took about 50-70 ns for minutes (the two vCPUs on one core complex) and about 320 ns
// for minutes (on two), and every multi-threaded runtime slowed down with it: Kiln on
// mobilenet_v3_small 0.8 → 1.6 ms at 2 threads (slower than its 1.25 ms at 1 thread), PyTorch
// eager 5.6 → 7.8 ms; at 1 thread nothing changed. A timing is only comparable with another taken
// in the same placement, so `kiln compare` probes it through the run and flags a change.
#pragma once

#include <optional>
#include <vector>

namespace kiln::profiler {

struct CoreRoundTrip {
  double ns = 0;  // median time of one round trip of a cache line between the two CPUs
  int cpuA = -1, cpuB = -1;
};

/// Probes for about `millis` ms. Nothing when this thread may run on fewer than two CPUs, or
/// when a pinned thread could not be started or did not answer (a CPU taken away).
std::optional<CoreRoundTrip> measureCoreRoundTrip(double millis = 5);

/// True when two probes of one run disagree enough that its timings mix two placements
/// (max/min of the probes above `ratio`).
bool placementChanged(const std::vector<double>& roundTripNs, double ratio = 1.5);

}  // namespace kiln::profiler

// The machine's ceilings for a roofline (Williams, Waterman and Patterson; Intel Advisor's
// cache-aware roofline): the peak f32 FMA throughput and the memory bandwidth at each cache level
// and DRAM, for one thread count. Measured once per machine and thread count and kept in the
// session store (schema 5: machine_ceilings, bandwidth_ceilings), which runs refer to.
//
// How it measures (measureCeilings):
// - Peak: a loop-IR kernel JIT-compiled by Kiln's own code generation for the host ("llvm") with
//   its widest f32 vectors (16 lanes on AVX-512, 8 on AVX2): `chains` independent accumulators,
//   acc = acc·a + b, registers only, in a parallel loop of one task per thread (the runtime's
//   pool). FLOPs = 2 · lanes · chains · iterations · threads; the best of several runs, timed by
//   the wall clock.
// - Bandwidth: a STREAM-style triad a[i] = b[i] + s·c[i] (s changes every pass), also
//   JIT-compiled with the widest vectors, each thread on its own slice repeated in place, at one
//   working set per level: half of what the threads may keep in L1, L2 and L3 (the sizes the CPU
//   reports in sysfs, else sysconf), and DRAM = 4 × L3 (at least 64 MiB). Bytes counted as STREAM
//   does: 12 per element (two reads, one write; write-allocate traffic not counted). Best of a
//   few runs.
// - Which level a call's data lives in is a guess from its size (roofline.h): the ceilings record
//   each level's capacity for this thread count (a private cache counts once per thread, a shared
//   one once).
//
// The machine key is the SHA-256 of the CPU's model name, its flags, its cache sizes and its
// hardware thread count: a stored measurement is reused while the key and the thread count match
// (`kiln roofline --measure` measures again).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::profiler {

class Store;

/// One data (or unified) cache level as the CPU reports it.
struct CacheLevel {
  int level = 0;           // 1, 2, 3
  int64_t sizeBytes = 0;   // one instance
  int sharedBy = 1;        // hardware threads sharing one instance
};

/// The caches of CPU 0 (L1d, L2, L3; instruction caches left out), from
/// /sys/devices/system/cpu/cpu0/cache (sysconf when sysfs says nothing; sysconf's L3 is wrong on
/// some virtual machines: 320 MiB for a 32 MiB L3 here).
std::vector<CacheLevel> hostCaches();

/// SHA-256 of the CPU model, flags, caches and hardware threads (see above).
std::string machineKey();

struct BandwidthCeiling {
  std::string level;            // "L1", "L2", "L3", "DRAM"
  int64_t capacityBytes = 0;    // what the threads may keep at this level; 0 for DRAM (unbounded)
  int64_t workingSetBytes = 0;  // the triad's three arrays, all threads together
  double gbPerSecond = 0;       // 1e9 bytes per second
};

struct MachineCeilings {
  int64_t id = 0;  // in the store; 0: not stored
  std::string machineKey;
  std::string cpu;
  int threads = 1;
  int vectorBits = 0;       // the FMA and triad kernels' f32 vector width
  double peakGflops = 0;    // f32 FMA, all threads
  std::vector<BandwidthCeiling> bandwidth;  // cache levels in order, DRAM last
  std::string method;       // how it was measured, in one line
  std::string measuredAt;   // ISO 8601 UTC
  const BandwidthCeiling* level(const std::string& name) const;
};

struct CeilingOptions {
  int repeats = 5;              // runs per ceiling, the best kept
  double targetSeconds = 0.01;  // about how long one run lasts
};

/// Measures the ceilings for `threads` (> 0) on this machine with the runtime's thread pool
/// (set to `threads` meanwhile, restored afterwards).
MachineCeilings measureCeilings(int threads, const CeilingOptions& options = {});

/// The ceilings of this machine for `threads`: the store's latest while valid (same machine key
/// and thread count) unless `remeasure`, else measured by `measure` and stored (without a store:
/// measured). `reused` says which.
struct CeilingsLookup {
  MachineCeilings ceilings;
  bool reused = false;
};
using MeasureCeilingsFn = std::function<MachineCeilings(int threads)>;
CeilingsLookup ceilingsFor(Store* store, int threads, bool remeasure, const MeasureCeilingsFn& measure);
CeilingsLookup ceilingsFor(Store* store, int threads, bool remeasure);

}  // namespace kiln::profiler

// The context every measurement carries: the machine (CPU, cores), the software (Kiln, libtorch,
// LLVM, the BLAS libtorch calls) and the date. Google Benchmark prints the same header.
#pragma once

#include <string>

#include "profiler/records.h"

namespace kiln::profiler {

/// The machine and library facts; the caller fills target, opt level, threads, Kiln's version
/// and compile time.
RunContext hostContext();

/// The CPU's marketing name from /proc/cpuinfo ("unknown" when absent).
std::string cpuModelName();
/// Distinct (package, core) pairs in /proc/cpuinfo; hardware threads when unknown.
int physicalCoreCount();
/// Now, as "2026-11-21T21:39:45Z".
std::string utcNow();

}  // namespace kiln::profiler

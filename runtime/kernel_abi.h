// The calling convention between generated code and the runtime. Plain C so that JIT-compiled
// kernels and exported shared libraries can use it without C++ name mangling.
//
// Every kernel has the signature `void kernel(void* const* args)`: args[i] is the data pointer of
// the i-th buffer parameter (inputs first, then outputs), each dense and row-major.
//
// Parallel loops in generated code are outlined into a task `int32_t task(begin, end, closure)`
// that runs iterations [begin, end); the kernel calls kiln_parallel_launch, which splits
// [0, extent) over the runtime's thread pool and returns when every chunk is done.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*KilnKernelFn)(void* const* args);
typedef int32_t (*KilnParallelTask)(int64_t begin, int64_t end, void* closure);

/// Runs task over [0, extent) on the runtime thread pool; returns 0, or the first non-zero
/// value a chunk returned.
int32_t kiln_parallel_launch(KilnParallelTask task, void* closure, int64_t extent);

/// kiln_parallel_launch with the range cut into `chunks_per_thread` chunks per thread (the
/// default launch uses 4): the parallel granularity a tuned schedule chose ("par_chunks").
int32_t kiln_parallel_launch_chunked(KilnParallelTask task, void* closure, int64_t extent, int64_t chunks_per_thread);

/// Called by kernels built with bounds checks (core/tir/bounds_check.h) when an access of
/// `buffer` at `index` lies outside [0, extent): prints one line to stderr and aborts.
#ifdef __cplusplus
[[noreturn]]
#endif
void kiln_bounds_fail(const char* kernel, const char* buffer, int64_t index, int64_t extent);

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
#include <string>

namespace kiln {
/// The one-line report of a failed kernel bounds check, shared by kiln_bounds_fail and the TIR
/// interpreter: "out-of-bounds access in kernel 'K': buffer 'B', index I, extent N".
std::string boundsFailureMessage(const std::string& kernel, const std::string& buffer, int64_t index,
                                 int64_t extent);
}  // namespace kiln
#endif

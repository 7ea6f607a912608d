// A fixed-size thread pool for the parallel loops of generated kernels. The calling thread takes
// part in every launch, so `threads` = 1 means no worker threads at all. Launches from inside a
// running task execute serially (no nested parallelism). The thread count comes from
// setNumThreads(), else KILN_NUM_THREADS, else the number of hardware threads.
#pragma once

#include <cstdint>

#include "runtime/kernel_abi.h"

namespace kiln::runtime {

/// Sets the thread count used by subsequent launches (recreates the pool). 0 = default.
void setNumThreads(int threads);
int numThreads();

/// Runs task over [0, extent) split into one contiguous chunk per thread.
int32_t parallelLaunch(KilnParallelTask task, void* closure, int64_t extent);

}  // namespace kiln::runtime

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

/// Chunks per participating thread of a launch by default: load balance on a shared machine
/// (a descheduled thread's chunks are taken by the others) against per-chunk overhead.
inline constexpr int64_t kDefaultChunksPerThread = 4;

/// Runs task over [0, extent) cut into `chunksPerThread` contiguous chunks per thread (1..64).
/// Thread i of T first runs the chunks of [i/T, (i+1)/T) of the range, the same share in every
/// launch, then helps with what is left of the others' shares.
int32_t parallelLaunch(KilnParallelTask task, void* closure, int64_t extent,
                       int64_t chunksPerThread = kDefaultChunksPerThread);

/// Gives the calling thread an alternate signal stack (sigaltstack) unless it has one, freed
/// when the thread ends: a handler installed with SA_ONSTACK can then run even after the thread
/// overflowed its stack (the measuring worker names the kernel that did). Every pool thread
/// calls this when it starts; other threads that run kernels call it themselves.
void ensureSignalStack();

}  // namespace kiln::runtime

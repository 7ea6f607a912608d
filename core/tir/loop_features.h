// Loop-nest features: what a scheduled kernel does, read from its loop IR, as a fixed-length row
// of numbers for the tuner's cost model (core/tune/cost_model.h).
//
// Knob values describe a schedule only within one schedule family (a hand-written dense kernel's
// rows and a sketch's mi are different things); the loop nest they produce is common ground. Like Ansor's
// features, these describe the statements of a kernel (every store, and every float let, where
// register tiles keep their loads) by how often they run, how much arithmetic and memory traffic
// they do, how their loops are laid out (parallel, vectorized, unrolled) and in which order
// their loops walk the data, so one model can rank a hand-written kernel against a sketch's, and
// what it learns on one shape carries to others.
//
// The row (loopFeatureNames() names each entry; counts and sizes are log2(1 + x)):
//   totals      float operations, transcendental calls, bytes loaded and stored (parameters and
//               local buffers apart), operations per parameter byte;
//   vectors     the share of float operations done in vector lanes and their mean width;
//   reuse       the share of loads that the innermost serial loop does not move (register reuse);
//   parallel    parallel iterations around the heaviest statement, their balance over `threads`,
//               the share of operations inside a parallel loop, the number of parallel loops, and
//               how the runtime splits them (attrs "parallel_chunks": chunks per thread,
//               iterations per chunk, the balance of chunks);
//   code        unrolled iterations around the heaviest statement, stores emitted after
//               unrolling (code size), loop depth, loops, stores;
//   locals      bytes of local buffers (all, the largest) and how many;
//   inner body  one iteration of the heaviest statement's innermost serial loop (a register
//               tile's body): its float operations, operations per parameter load, parameter
//               bytes per operation;
//   loop order  for the heaviest statement's two outermost loops, stepping one iteration: the
//               share of parameter bytes in their bodies whose address stays put (reused by the
//               next iteration) and the mean address step (which way a fused loop runs);
//   heaviest    for the store that does the most float operations: its share of them.
// Not in the row: the heaviest statement's innermost loops one by one (extent, kind, bytes
// touched inside each). With the 16–64 records a task has, those 24 columns made the ranking
// worse on every record set but Winograd's (core/README.md has the figures).
// A loop extent that is not a constant counts as its upper bound over the enclosing loops (a
// window clipped at the image border as unclipped), else 1.
#pragma once

#include <string>
#include <vector>

#include "core/tir/stmt.h"

namespace kiln::core::tir {

/// The features of `func` (loopFeatureNames().size() entries), for a runtime of `threads` threads.
std::vector<float> loopFeatures(const PrimFunc& func, int threads);

/// The name of each entry of loopFeatures' row.
const std::vector<std::string>& loopFeatureNames();

}  // namespace kiln::core::tir

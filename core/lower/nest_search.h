// The sketch of an element nest: how Kiln schedules a kernel whose plain form is one perfect loop
// nest storing every output element once from loads (a fused chain of element-wise ops,
// broadcasts, transposes, reshapes, layout transforms and slices; core/lower/fused.cpp builds it
// serial and scalar). A trace of schedule primitives (core/tir/schedule.h) makes it fast:
//   1. split the innermost loop where a reshape's index divides it (a loop over 256 merged
//      columns that reads a [4, 64] value becomes 4 × 64 loops), so the divisions vanish;
//   2. split vectors of `vl` lanes off the innermost loop and vectorize them, and the tail;
//   3. unroll `un` vectors;
//   4. with `par`, fuse leading loops into one parallel loop of at least kParallelMinExtent
//      iterations, or, when all of them hold fewer, make the loop over vectors parallel (what the
//      lowering's LoopNest does for its own nests).
// Annotation knobs: vl (vector lanes, 1 = scalar), un (1, 2 or 4), par (0 or 1).
//
// Tuning. A nest whose inputs and output are f32 has the tuning key "nest:" + its group's
// workload key (lower.h: the ops, their attributes and types, inputs numbered $0, $1, ...), which
// describes the computation completely: elementNestTaskGraph rebuilds it as a graph of its own.
// Its space is the annotations below; a record's knobs build the sketch again (its trace is
// derived, not replayed).
#pragma once

#include <cstdint>
#include <string>

#include <vector>

#include "core/ir/graph.h"
#include "core/lower/lower.h"
#include "core/lower/schedule_config.h"
#include "core/tir/schedule.h"

namespace kiln::core::lower {

/// The annotation an untuned build runs: the target's vector width, no unrolling, parallel when
/// the `numel` outputs are enough to spread over threads (wantParallel).
Knobs elementNestDefaultKnobs(int64_t numel, const LowerOptions& options);

/// Applies the sketch under `knobs` to the nest storing buffer `block`. Steps the nest does not
/// admit are left out (a loop whose loads keep a division that depends on it does not vectorize;
/// a loop over vectors that `un` does not divide is not unrolled), so the kernel always computes
/// what the plain nest did, and the trace says what was applied.
void applyElementNestSketch(tir::Schedule& sched, const std::string& block, const Knobs& knobs);

/// The annotations of a nest of `numel` outputs, the default first: vl the target's lanes and
/// its halves down to 4 (and 1, scalar), un 1, 2, 4, par 0 and 1.
std::vector<Knobs> elementNestAnnotations(int64_t numel, const LowerOptions& options);
/// `tuned` when it is one of the annotations, else the default.
Knobs elementNestKnobsOf(const Knobs* tuned, int64_t numel, const LowerOptions& options);

/// "nest:" + `workloadKey`.
std::string elementNestTuneKey(const std::string& workloadKey);
/// The graph a nest key describes: a graph input per group input ($i), the group's nodes in one
/// fused group, its root's value the output. Lowered, its kernel has this key. Throws kiln::Error
/// (InvalidInput) when `key` is not a nest key or its workload does not parse.
Graph elementNestTaskGraph(const std::string& key);
/// The output elements of a nest key's workload (its root's type); throws as above.
int64_t elementNestOutputs(const std::string& key);

}  // namespace kiln::core::lower

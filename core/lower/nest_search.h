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
// Annotation knobs: vl (vector lanes, 1 = scalar), un (1, 2 or 4), par (0 or 1). A concatenation
// (with the element ops before it) is one such nest per input, each storing its part of the
// output; the sketch takes the steps above on each of them under the same annotation, except that
// with `par` only the parts with enough elements for threads (wantParallel) run parallel.
//
// Tuning. A nest whose inputs and output are f32 has the tuning key "nest:" + its group's
// workload key (lower.h: the ops, their attributes and types, inputs numbered $0, $1, ...), which
// describes the computation completely: nestTaskGraph rebuilds it as a graph of its own.
// Its space is the annotations below; a record's knobs build the sketch again (its trace is
// derived, not replayed). Reductions and softmax are row nests (below), with a sketch of their own.
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
/// the `numel` outputs are enough to spread over threads (wantParallel); the lowering makes it
/// scalar when those vectors would gather bytes (gathersBytes).
Knobs elementNestDefaultKnobs(int64_t numel, const LowerOptions& options);

/// Applies the sketch under `knobs` to the nest storing buffer `block`. Steps the nest does not
/// admit are left out (a loop whose loads keep a division that depends on it does not vectorize;
/// a loop over vectors that `un` does not divide is not unrolled), so the kernel always computes
/// what the plain nest did, and the trace says what was applied.
void applyElementNestSketch(tir::Schedule& sched, const std::string& block, const Knobs& knobs);

/// The sketch on a concatenation's plain form (core/lower/fused.cpp): one perfect nest per input
/// storing its part of buffer `block`, each taking the steps above under the same `knobs` (serial
/// where a part is too small for threads).
void applyConcatNestSketch(tir::Schedule& sched, const std::string& block, const Knobs& knobs);

/// The annotations of a nest of `numel` outputs, elementNestDefaultKnobs first (the lowering's
/// untuned choice unless its vectors would gather bytes, when it is the scalar point): vl the
/// target's lanes and its halves down to 4 (and 1, scalar), un 1, 2, 4, par 0 and 1.
std::vector<Knobs> elementNestAnnotations(int64_t numel, const LowerOptions& options);
/// `tuned` when it is one of the annotations, else the default.
Knobs elementNestKnobsOf(const Knobs* tuned, int64_t numel, const LowerOptions& options);
/// Whether `nest` gathers vectors of bytes: reads a vector whose elements are not adjacent (a
/// transpose's, a layout transform's read across channel blocks) and loads or stores one-byte
/// elements. An untuned element nest whose default vectors would do so runs scalar instead
/// (vl = 1): on quantized_mobilenet_v2 the packed quantize of the RGB input took 62 µs vectorized
/// and 9.8 µs scalar, the u8 layout transform before its classifier 12.8 and 6.2 µs (x86 has no
/// byte gather). An f32 transpose keeps its gathers (bert_encoder's keys: 7 % slower scalar).
bool gathersBytes(const tir::Stmt& nest);

/// "nest:" + `workloadKey`.
std::string elementNestTuneKey(const std::string& workloadKey);
/// The graph a nest, row nest, pool or window key describes: a graph input per group input ($i), the group's
/// nodes in one fused group (one node alone), its root's value the output. Lowered, its kernel
/// has this key. Throws kiln::Error (InvalidInput) when `key` is not such a key or its workload
/// does not parse.
Graph nestTaskGraph(const std::string& key);
/// The output elements of a nest key's workload (its root's type); throws as above.
int64_t elementNestOutputs(const std::string& key);

// ---- row nests ----------------------------------------------------------------------------------
// A row nest is a reduction along rows (mean, sum, max, min over trailing axes, alone or at the
// root of a fused group whose element ops it evaluates as it reads) or a softmax along the last
// axis. Its plain form (ops_reduce.cpp) is a loop over rows around passes over the row, each a
// loop around one store: a reduction into one element (y[o] = y[o] op v) or a map (one element
// per iteration). Softmax is four passes: the max, the exponentials, their sum, the division.
// The sketch, per pass:
//   - a reduction: its loop split into `un` accumulators of `vl` lanes (rfactor keeps their
//     partial results apart), each updated by vectors; the accumulators folded into one vector
//     (rfactor again), then its lanes into the element; the iterations left over run scalar;
//   - a map: vectors of `vl` lanes and their tail, `un` of them unrolled (the element sketch);
// and the loop over rows parallel with `par`. Annotation knobs as the element nest's.
// Tuning key: "reduce:" + the group's workload key (f32 only).

/// The rows and the length of each row a row nest reduces, and its passes over a row.
struct RowNestShape {
  int64_t rows = 0, length = 0;
  int64_t passes = 1;  // softmax: 4
};

/// The untuned annotation: vectors of `lanes` lanes (the element type's), the most accumulators
/// (up to 4) that leave the fewest elements of a row to the scalar tail, parallel rows when there
/// is enough work (wantParallel: a reduction's outputs of `length` reads each, a softmax's rows ·
/// length outputs).
Knobs rowNestDefaultKnobs(const RowNestShape& shape, int lanes);
/// The default (f32 lanes) first, then the element nest's grid.
std::vector<Knobs> rowNestAnnotations(const RowNestShape& shape, const LowerOptions& options);
/// `tuned` when it is one of the annotations, else the default.
Knobs rowNestKnobsOf(const Knobs* tuned, const RowNestShape& shape, const LowerOptions& options);
/// Applies the sketch above to a row nest's plain function. Vectors a loop does not admit are
/// left out, as in the element nest.
void applyRowNestSketch(tir::Schedule& sched, const Knobs& knobs);

/// Folds the partial results of an rfactor's fold loop `fold` (y[f] = y[f] op partial[i] over
/// i < n) as a tree: while n is even and above 2, the upper half is combined into the lower half
/// in one vector (rfactor again); the last pair (or an odd rest) is scalar, unrolled when short.
/// The row nest's reductions and dense's dot-product tile (gemm_search.h) fold this way.
void foldPartialsAsTree(tir::Schedule& sched, std::string fold);

/// "reduce:" + `workloadKey`.
std::string rowNestTuneKey(const std::string& workloadKey);
/// The shape of a row nest key's reduction; throws kiln::Error (InvalidInput) when `key` is not
/// one (a softmax along another axis than the last is not).
RowNestShape rowNestShapeOfKey(const std::string& key);

// ---- plain window nests --------------------------------------------------------------------------
// A pooling that conv_search.h's regioned window nest does not take (an NCHW input, an adaptive
// average whose windows differ in size) is a plain window nest (ops_pool.cpp): per output element
// one accumulator over the taps its window reaches inside the image, the tap loops' bounds
// computed from the output's position (schedule.h WindowAxis::tapRange; an adaptive window's
// [⌊i·H/OH⌋, ⌈(i+1)·H/OH⌉)):
//   for n, c, oh, ow:                        (c the channel block of a packed input)
//     for l:  acc[l] = init                  (no l loops on an NCHW input: one lane)
//     for kh, kw over the taps inside:  for l_t:  acc[l_t] = acc[l_t] op x[n, c, ih, iw, l_t]
//     for l_w:  y[n, c, oh, ow, l_w] = epilogue(acc[l_w], divided by the window's count)
// The sketch: l, l_t and l_w in vectors of `vl` lanes (split when vl is less than the block);
// with `par`, the leading loops fused into one parallel loop of at least kParallelMinExtent
// iterations when they have that many, else all four. Annotation knobs vl, par.
// Tuning key: "window:" + the group's workload key.

/// The outputs, channel lanes and taps (the largest window) of a plain window nest.
struct WindowNestShape {
  int64_t outputs = 0;  // output elements (all lanes)
  int64_t lanes = 1;    // the packed block, 1 on an NCHW input
  int64_t taps = 1;     // the largest window
};
/// The untuned annotation: the whole block in vectors, parallel when there is enough work
/// (wantParallel over the outputs, a window's taps each).
Knobs windowNestDefaultKnobs(const WindowNestShape& shape);
/// The default first, then vl ∈ {the block, its halves down to 4 that divide it, 1} × par ∈ {0, 1}.
std::vector<Knobs> windowNestAnnotations(const WindowNestShape& shape);
/// `tuned` when it is one of the annotations, else the default.
Knobs windowNestKnobsOf(const Knobs* tuned, const WindowNestShape& shape);
/// Applies the sketch above to a plain window nest's function.
void applyWindowNestSketch(tir::Schedule& sched, const Knobs& knobs);
/// "window:" + `workloadKey`.
std::string windowNestTuneKey(const std::string& workloadKey);
/// The shape of pooling `op` (max_pool2d, avg_pool2d, adaptive_avg_pool2d) from x of shape `xs`
/// into y of shape `ys`.
WindowNestShape windowNestShapeOf(const std::string& op, const Attrs& attrs, const Shape& xs,
                                  const Shape& ys);
/// The shape of a window key's pooling; throws kiln::Error (InvalidInput) when `key` is not one.
WindowNestShape windowNestShapeOfKey(const std::string& key);

/// The trace annotation `knobs` records on a nest, row nest or window key's kernel (what a tuning record
/// of it stores): the key's task graph lowered with `knobs` as its record. Throws kiln::Error
/// (InvalidInput) for another kind of key or an annotation the kernel does not take.
tir::Trace nestSketchTrace(const std::string& key, const Knobs& knobs, int lanes, int registers);

}  // namespace kiln::core::lower

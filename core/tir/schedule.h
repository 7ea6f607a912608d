// Schedule primitives on the loop IR: TIR-to-TIR transformations of a lowered PrimFunc, each
// recorded as a step of a Trace (core/tir/trace.h) that replays on a fresh lowering.
//
// Handles. A loop is named by its variable: a Schedule keeps every bound variable's name unique
// in its function (duplicates are renamed the way the printer disambiguates them: i, i_1, ...),
// so the printed function shows exactly the names primitives accept. A handle is either such a
// name or "block/k", the k-th loop (0 = outermost) around `block`; a block is named by the buffer
// its statement stores to (getLoops). Traces always record resolved names.
//
// Names created: split(i) → i_o, i_i (and i_t for a tail loop); fuse(i, j) → i_j_fused (merge(i,
// j) keeps i, j disappears; fission(i) → i, i_f, i_f_1, ...);
// compute_at(t, L) → t_local (buffer) and its loop t_k; cache_write(L) → y_local (y the block) and copy
// loops named after the nest's loops with _r (read) and _w (write); rfactor(k) → y_rf (buffer) and
// loops k_init, k_fold (and r_init, r_fold for each loop r of a tile it spans); a copied loop body
// (tail loops) renames its inner variables with suffix _t.
// A name already taken gets _1, _2, ...
//
// Every primitive checks its preconditions and throws kiln::Error with one line naming the
// primitive and the loop ("split: loop 'i' has a non-constant extent") instead of producing
// code that computes something else. Legality of reordering and parallelizing is checked exactly
// (schedule_analysis.h replays the integer control flow of the nest): iterations must touch
// disjoint elements, except that reorder accepts reductions (b[x] = b[x] op v with op one of
// + * min max: the order of updates changes, which for floats is a reassociation within rounding,
// as elsewhere in Kiln) and both accept local scratch buffers each iteration writes before it
// reads (parallel moves their allocation into the loop so every worker has its own).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tir/stmt.h"
#include "core/tir/trace.h"

namespace kiln::core::tir {

/// How split handles an extent the factor does not divide (trace parameter 0 / 1).
enum class TailStrategy {
  /// One loop nest over ceil(n / f) · f iterations; the body runs under `if (i < n)`, pushed down
  /// through perfectly nested inner loops so the nest stays perfect (reorder and tile still
  /// apply). The body is not straight-line any more, so vectorize rejects the inner loop.
  Guard = 0,
  /// A loop nest over floor(n / f) · f iterations followed by a loop i_t over the n mod f last
  /// ones (a copy of the body). No condition in the main nest, so its inner loop vectorizes.
  Loop = 1,
};

/// Names of the loops around the first store to buffer `block`, outermost first. Throws
/// kiln::Error when no statement stores to `block`.
std::vector<std::string> getLoops(const PrimFunc& func, const std::string& block);
/// Every loop name of `func`, outer before inner, earlier before later.
std::vector<std::string> loopNames(const PrimFunc& func);

class Schedule {
 public:
  /// Starts from `func` (its attrs["trace"], if any, is kept as the history).
  explicit Schedule(PrimFunc func);

  /// The scheduled function; attrs["trace"] holds trace().str().
  const PrimFunc& func() const { return m_func; }
  const Trace& trace() const { return m_trace; }

  std::vector<std::string> getLoops(const std::string& block) const;
  std::vector<std::string> loopNames() const;

  /// Splits `loop` (extent n, constant) into outer × inner loops with inner extent `factor` ≥ 1.
  /// A parallel loop keeps its outer part parallel. Returns {outer, inner}.
  std::pair<std::string, std::string> split(const std::string& loop, int64_t factor,
                                            TailStrategy tail = TailStrategy::Guard);
  /// Permutes loops of one perfectly nested chain (each loop's body is exactly the next loop);
  /// loops of the chain that are not listed keep their positions, listed ones take the listed
  /// order. Rejects loops that are not perfectly nested, bounds that would depend on a loop moved
  /// inside them, and dependences between iterations (see the file comment).
  void reorder(const std::vector<std::string>& loops);
  /// Fuses `outer` and its direct, perfectly nested child `inner` (both serial, constant extents)
  /// into one loop; returns its name.
  std::string fuse(const std::string& outer, const std::string& inner);
  /// Merges loop `second` into `first`, the loop it directly follows in one sequence (both serial,
  /// equal constant bounds): one loop whose iteration i runs `first`'s body, then `second`'s for
  /// the same i (`second`'s variable becomes `first`'s). Rejects it when an iteration of `second`
  /// would then run before a later iteration of `first` it depends on (a consumer that reads
  /// what the producer's later iterations write, or the reverse). Returns `first`'s name.
  std::string merge(const std::string& first, const std::string& second);
  /// Distributes serial loop `loop` over the statements of its body (a sequence): one loop per
  /// statement, in order, with the same bounds; the first keeps the name, the others are named
  /// `loop`_f, `loop`_f_1, ... Merge's inverse, legal under the same check (each pair of parts
  /// could be merged back): no iteration of a later statement depends on a later iteration of an
  /// earlier one. Returns the loops' names.
  std::vector<std::string> fission(const std::string& loop);
  /// split(x, fx) and split(y, fy) with guards, then reorder(x_o, y_o, x_i, y_i); recorded as one
  /// step. `y` must be perfectly nested inside `x`. Returns {x_o, y_o, x_i, y_i}.
  std::vector<std::string> tile(const std::string& x, const std::string& y, int64_t fx, int64_t fy);
  /// Marks a serial loop with a constant extent Unrolled.
  void unroll(const std::string& loop);
  /// Turns an innermost serial loop (constant extent 2..64) into vector code
  /// (core/tir/vectorize.h): one vector of the largest power of two ≤ n lanes, then the
  /// remainder in halving widths. The body must be straight-line (stores, lets) with stores
  /// contiguous in the loop variable; the loop disappears from the function.
  void vectorize(const std::string& loop);
  /// The int8 dot-product step (schedule_dot4.cpp): serial loop `loop` of extent 4 whose body
  /// is one store y[f] = y[f] + i32(a[A + j]) · i32(b[B + j]) (a u8, b i8, f free of the loop j,
  /// or a reduction starting at j's first iteration) becomes y[f] = dot4_u8i8(y[f], a[A : 4],
  /// b[B : 4]), the four products in one call (vpdpbusd's lane); the loop disappears.
  /// Vectorizing an enclosing loop then widens the call (core/tir/vectorize.h).
  void dot4(const std::string& loop);
  /// Marks a serial loop Parallel after checking its iterations are independent; it may not be
  /// nested in, or contain, another parallel loop.
  void parallel(const std::string& loop);
  /// Moves the loop nest that produces local buffer `block` into `loop`, a loop of a later
  /// statement that reads it: each iteration of `loop` first computes the elements of `block` its
  /// body reads into a smaller local buffer `block`_local. Supported: the producer is a perfect
  /// loop nest (constant bounds from 0) whose only statement stores `block` at the row-major index
  /// of its loop variables (an injective nest over the buffer's index space); every read of
  /// `block` is inside `loop` at an index affine in the loops inside it. Anything else is
  /// rejected.
  void computeAt(const std::string& block, const std::string& loop);
  /// Allocates local buffer `block` inside `loop`, one iteration's elements only: every access to
  /// it is in `loop` at an index affine in the loops inside it (one outer part for all), and each
  /// iteration reads only what it wrote itself (checked by replaying the accesses). The buffer
  /// shrinks to the window one iteration touches (a block of tiles' products instead of the whole
  /// layer's), its indices relative to the window's start: per dimension of its shape where the
  /// indices split that way (a slice of an inner dimension stays a slice), else one flat range.
  void storeAt(const std::string& block, const std::string& loop);
  /// Stages the elements that `loop` updates in a local buffer (the block's name + _local): read
  /// before the loop (a copy nest with loops named ..._r), written back after it (..._w), the
  /// updates inside the loop going to the local buffer, which the code generator keeps in
  /// registers when it is small and its indices constant (an unrolled register tile). Supported:
  /// the loop's body is a perfect nest of loops with constant bounds around one store whose
  /// index does not depend on `loop`, is affine and injective in the nest's variables, and is the
  /// only element of that buffer the store reads (a reduction's accumulator). Anything else is
  /// rejected. The loop alone names the block, so a trace replays on kernels whose buffers are
  /// named otherwise.
  void cacheWrite(const std::string& loop);
  /// Factors reduction loop `loop` out of a reduction (schedule_rfactor.cpp): the loops from the
  /// outermost perfectly nested one above `loop` that does not move the element, down to the one
  /// store `y[f] = y[f] op v` (op one of + * min max) at the bottom, update a local buffer y_rf
  /// of partial results instead, one per iteration of `loop` and of every loop of that chain that
  /// moves the element (a register tile's), `loop`'s index innermost; loops `loop`_init before
  /// them start it at op's identity, and loops `loop`_fold after them (with _fold copies of the
  /// tile's loops) combine it into y. The factored loop's iterations then update distinct
  /// elements, so it vectorizes. Reassociates floats as reorder does. At most 1024 partial results.
  void rfactor(const std::string& loop);

  /// Applies one recorded step (trace replay).
  void apply(const TraceStep& step);

 private:
  struct Recording;
  void record(TraceStep step);
  void setBody(Stmt body);

  PrimFunc m_func;
  Trace m_trace;
  int m_quiet = 0;  // > 0 while a compound primitive (tile) applies its parts
};

}  // namespace kiln::core::tir

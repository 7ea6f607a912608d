// Schedule traces: the record of schedule primitives applied to a PrimFunc, as data.
//
// A Trace is a list of steps {primitive, loop names, integer parameters}. It prints one step per
// line and parses back (`Trace::parse(t.str()) == t`):
//
//   split(i; 8, 1)            split loop i by 8, tail strategy 1 (0 = guard, 1 = tail loop)
//   tile(i0, i1; 4, 8)        one recorded step; it expands to split, split, reorder
//   reorder(i0_o, i1_o, i0_i, i1_i)
//   fuse(i0, i1)
//   unroll(i1_i)
//   vectorize(i_i)
//   parallel(i_o)
//   compute_at(t, i0)         block (the buffer the producer writes), then the consumer loop
//   cache_write(k)            the loop whose updates (of the one buffer its nest stores) are staged
//   merge(i, j)               loop j into the loop i it directly follows
//   store_at(t, i)            local buffer t allocated per iteration of loop i
//   fission(i)                loop i distributed over the statements of its body
//   rfactor(k)                reduction loop k's partial results kept apart, then folded
//   dot4(j)                   loop j's four u8 · i8 products summed by one dot4_u8i8 call
//
// Loops are named by their variables (core/tir/schedule.h explains the naming), and every name a
// primitive creates is a deterministic function of the names it started from, so a trace recorded
// on one lowering replays on a fresh lowering of the same workload to the identical function.
// `apply` replays a trace and records it in PrimFunc::attrs["trace"] (appended to a trace the
// input already carried), so a scheduled function always says how it was obtained.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tir/stmt.h"

namespace kiln::core::tir {

struct TraceStep {
  std::string primitive;           // split, reorder, fuse, tile, unroll, vectorize, parallel, ...
  std::vector<std::string> loops;  // loop names (compute_at: the producer's block first)
  std::vector<int64_t> params;     // integer parameters (split: factor, tail; tile: fx, fy)

  /// "split(i; 8, 0)"
  std::string str() const;
  bool operator==(const TraceStep&) const = default;
};

class Trace {
 public:
  Trace() = default;
  explicit Trace(std::vector<TraceStep> steps) : m_steps(std::move(steps)) {}

  const std::vector<TraceStep>& steps() const { return m_steps; }
  bool empty() const { return m_steps.empty(); }
  void append(TraceStep step) { m_steps.push_back(std::move(step)); }
  void append(const Trace& other);

  /// One step per line, each ending in a newline ("" for an empty trace).
  std::string str() const;
  /// Parses str()'s format (blank lines are ignored). Throws kiln::Error naming the line on
  /// malformed text, an unknown primitive or a wrong number of loops or parameters.
  static Trace parse(const std::string& text);

  /// Replays every step on `func` (core/tir/schedule.h); the result's attrs["trace"] holds the
  /// input's trace followed by these steps. Throws kiln::Error from the first step that does not
  /// apply.
  PrimFunc apply(const PrimFunc& func) const;

  bool operator==(const Trace&) const = default;

 private:
  std::vector<TraceStep> m_steps;
};

/// Checks a step's primitive and its loop and parameter counts; throws kiln::Error.
void validateStep(const TraceStep& step);

}  // namespace kiln::core::tir

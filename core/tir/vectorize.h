// The vectorize schedule primitive: rewrites innermost scalar loops into explicit vector code
// (Ramp/Broadcast loads, vector arithmetic, vector stores), so elementwise, broadcast, copy,
// transform and fused element-chain kernels do not depend on LLVM's loop vectorizer (which may
// fully unroll a 16-wide channel loop and then vectorize the next loop out with gathers).
//
// A loop `for (i, min, n) body` qualifies when
// - it is innermost and straight-line: body holds only Store, LetStmt and Seq (no loops, ifs,
//   allocations, existing vector values);
// - every Store index is affine in i with stride 1 (no reductions into one location), every Load
//   index affine in i with a constant stride (stride 0: a broadcast scalar; other strides: a
//   gather), integer / and % only on values that do not depend on i;
// - a buffer the body stores to is loaded only at the index it is stored at (no loop-carried
//   dependence);
// - n is a constant ≥ 2 and the loop is Serial, Vectorized or Parallel (a parallel loop keeps
//   its parallel outer part).
// The one vector value a body may hold already is a dot4_u8i8 call's 4-byte words (schedule.h
// dot4): the call widens to a vector of accumulators, a word the lanes share stays one 4-byte
// load, and words of consecutive lanes that are adjacent become one contiguous load.
// It becomes full vectors of `lanes` lanes (a loop over n / lanes chunks, parallel when the
// original was) followed by the remainder in halving widths. Other loops are left unchanged, so
// the result always computes exactly what the input did (float operations are applied lane by
// lane in the same order).
#pragma once

#include "core/tir/stmt.h"

namespace kiln::core::tir {

/// Vectorizes every qualifying innermost loop of `body`; `lanes` is the vector width for 32-bit
/// elements (wider elements get proportionally fewer lanes, narrower ones more).
tir::Stmt vectorizeInnermostLoops(const tir::Stmt& body, int lanes);

}  // namespace kiln::core::tir

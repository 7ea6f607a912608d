// A reference interpreter for the loop IR: executes a PrimFunc directly on memory buffers. It is
// the numerical oracle for lowering tests (before and independently of code generation) and for
// fuzzing code generation against it. It favours obviously-correct semantics over speed.
//
// Semantics implemented (core/tir/expr.h, core/tir/stmt.h):
// - Scalars and vectors (Ramp, Broadcast, vector Load/Store/arithmetic) lane by lane.
// - Integers wrap to their bit width; Div/Mod truncate toward zero (C); division by zero is an
//   error. Floats of 32 bits are rounded to single precision after every operation.
// - Every ForKind runs as a serial loop. Allocate gives heap memory filled with 0xFF bytes (NaN
//   for floats, -1 for signed integers), so reading an uninitialized local shows up in results.
// - Each Load and Store is bounds-checked (always, so KILN_BOUNDS_CHECK changes nothing here).
//   A bounds_check intrinsic (core/tir/bounds_check.h) that fails throws InternalError with
//   kiln::boundsFailureMessage's text.
#pragma once

#include <vector>

#include "core/tir/stmt.h"

namespace kiln::core::lower {

/// Runs `func` with `args[i]` the data pointer of `func.params[i]` (dense, row-major, with the
/// parameter's element type and shape). Throws kiln::InternalError on an out-of-bounds access,
/// an integer division by zero, an unbound variable or buffer, or an argument count mismatch.
void interpret(const tir::PrimFunc& func, const std::vector<void*>& args);

}  // namespace kiln::core::lower

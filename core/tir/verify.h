// The loop-IR verifier: what every kernel must satisfy between compile steps (core/compile.h runs
// it after lowering and after every loop-IR pass when asked to verify, e.g. `kiln ir --verify`).
//
// Checked, per PrimFunc:
// - scoping: every Var is bound by an enclosing For or LetStmt, and no Var is bound again inside
//   its own scope; every Load/Store buffer is a parameter or an enclosing Allocate's buffer;
// - writes: Stores target outputs or local buffers, never an input;
// - types: a Load's type and a Store's value have the buffer's element type, with as many lanes as
//   the index; loop bounds and indices are integers; conditions are Bool; a LetStmt's Var has its
//   value's type; binary operands agree (the builders enforce it; a mutator could break it);
// - loops: Unrolled and Vectorized loops have constant extents; no loop has a negative one;
// - constant indices (a scalar IntImm, or a Ramp of constant base and stride) lie inside their buffer.
#pragma once

#include <string>
#include <vector>

#include "core/tir/stmt.h"

namespace kiln::core::tir {

/// Every problem found, one line each ("store to input buffer 'x'"); empty when the kernel is well formed.
std::vector<std::string> verifyPrimFunc(const PrimFunc& f);

/// Throws kiln::Error (InternalError) naming the kernel, `when` ("after lowering") and the first
/// problems, when verifyPrimFunc finds any.
void verifyPrimFuncOrThrow(const PrimFunc& f, const std::string& when);

}  // namespace kiln::core::tir
